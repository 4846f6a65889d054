package envoyrls_test

import (
	"context"
	"errors"
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

// oursWired reports whether app-bootstrap's configuration reads the
// APP_RLS_ variables (an envPrefix "RLS_" or the full names), i.e. whether
// our service can serve the RLS protocol yet.
func oursWired(root string) bool {
	files, _ := filepath.Glob(filepath.Join(root, "app-bootstrap", "config", "*.go"))
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err == nil && (strings.Contains(string(b), `"RLS_"`) || strings.Contains(string(b), "APP_RLS_ADDR")) {
			return true
		}
	}
	return false
}

// startOurs builds and starts our service with the YAML on its own
// private redis-server, or skips when the RLS wiring has not landed.
func startOurs(t *testing.T, root string, configs map[string]string) *envoyrls.Ours {
	t.Helper()
	if !oursWired(root) {
		t.Skip("skipped: app-bootstrap does not read APP_RLS_ADDR yet (the RLS server and its wiring have not landed); the reference side ran")
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
