package envoyrls_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/tools/internal/envoyrls"
)

// needBinaries returns the reference binaries, skipping the test when they
// are absent and ENVOY_RLS_REQUIRED is not 1 (failing when it is).
func needBinaries(t *testing.T) (string, envoyrls.Binaries) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts processes")
	}
	root, err := envoyrls.RepoRoot()
	require.NoError(t, err)
	bins, err := envoyrls.FindBinaries(root)
	if errors.Is(err, envoyrls.ErrNoBinaries) {
		if envoyrls.Required() {
			t.Fatalf("%v, and %s=1", err, envoyrls.EnvRequired)
		}
		t.Skipf("skipped: %v; run make envoy-rls-bin (or set %s=1 to make this a failure)", err, envoyrls.EnvRequired)
	}
	require.NoError(t, err)
	if _, err := exec.LookPath("redis-server"); err != nil {
		if envoyrls.Required() || os.Getenv("REDIS_REQUIRED") == "1" {
			t.Fatal("redis-server not on PATH")
		}
		t.Skip("skipped: needs redis-server on PATH")
	}
	return root, bins
}

// startRedis starts a private redis-server stopped at cleanup.
func startRedis(t *testing.T) *envoyrls.Redis {
	t.Helper()
	r, err := envoyrls.StartRedis(context.Background())
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// oursWired reports whether our service serves the RLS protocol yet: a
// non-test Go file of app-bootstrap outside its config package imports
// adapter-inbound-grpc/rls (the configuration alone, APP_RLS_*, may land
// before the server is wired).
func oursWired(root string) bool {
	found := false
	_ = filepath.WalkDir(filepath.Join(root, "app-bootstrap"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || found {
			return nil
		}
		if d.IsDir() {
			if d.Name() == "config" || d.Name() == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err == nil && strings.Contains(string(b), `/adapter-inbound-grpc/rls"`) {
			found = true
		}
		return nil
	})
	return found
}

// startOurs builds and starts our service with the YAML on its own
// private redis-server, or skips when the RLS wiring has not landed.
func startOurs(t *testing.T, root string, configs map[string]string) *envoyrls.Ours {
	t.Helper()
	if !oursWired(root) {
		t.Skip("skipped: app-bootstrap does not wire adapter-inbound-grpc/rls yet (APP_RLS_ADDR serves nothing); the reference side ran")
	}
	bin := filepath.Join(t.TempDir(), "tech-log-backend")
	require.NoError(t, envoyrls.BuildOurs(context.Background(), root, bin))
	rs := startRedis(t)
	o, err := envoyrls.StartOurs(context.Background(), envoyrls.OursConfig{Bin: bin, RedisAddr: rs.Addr, Configs: configs})
	require.NoError(t, err)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("tech-log-backend log:\n%s", o.LogTail())
		}
		_ = o.Close()
	})
	return o
}
