package main_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-inbound-web/subject"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/ratecarry"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
)

// Identity black-box tests (issue 16): the binary, env and HTTP only,
// against a private redis-server.

// writeKeysFile writes the SHA-256 digests of keys, one per line, as an
// operator would (`printf %s "$key" | sha256sum`).
func writeKeysFile(t *testing.T, path string, keys ...string) {
	t.Helper()
	var b strings.Builder
	b.WriteString("# api keys: sha256 digests, one per line\n")
	for _, k := range keys {
		b.WriteString(subject.DigestAPIKey(k).String() + "\n")
	}
	require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o600))
}

func apiKeyEnv(t *testing.T, redisAddr, keysFile string) []string {
	return append(enabledEnv(t, redisAddr), "APP_WEB_IDENTITY=api-key", "APP_WEB_API_KEYS_FILE="+keysFile)
}

// commandCalls is the number of calls of command on srv (INFO
// commandstats, read by redistest with redisinfo).
func commandCalls(t *testing.T, srv *redistest.Server, command string) int64 {
	t.Helper()
	return redistest.CommandStats(t, srv.Client())[command].Calls
}

// dbSize counts the server's keys but the revision catalog, which the
// service records at start (ratecarry.Catalog): the keys requests wrote.
func dbSize(t *testing.T, srv *redistest.Server) int64 {
	t.Helper()
	return redistest.KeyCount(t, srv.Client(), ":rate:"+ratecarry.KeyRegionCatalog+":")
}

// TestE2EAPIKeyModeRandomKeys: in api-key mode, 10,000 requests with random
// keys all get 401 and create no Redis key (no evaluation runs at all); a
// verified key is limited, and creates state, as before.
func TestE2EAPIKeyModeRandomKeys(t *testing.T) {
	rs := redistest.Start(t)
	keysFile := filepath.Join(t.TempDir(), "api-keys")
	const goodKey = "e2e-verified-key-0001"
	writeKeysFile(t, keysFile, goodKey)
	in := startInstance(t, apiKeyEnv(t, rs.Addr(), keysFile))

	const requests, workers = 10_000, 16
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second) // the bound; it takes a few seconds
	defer cancel()
	tr := &http.Transport{MaxIdleConnsPerHost: workers, MaxConnsPerHost: workers}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	var next, unauthorized atomic.Int64
	other := make(chan string, workers)
	var wg sync.WaitGroup
	start := time.Now()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := make([]byte, 16)
			for next.Add(1) <= requests && ctx.Err() == nil {
				_, _ = rand.Read(key)
				req, err := http.NewRequestWithContext(ctx, http.MethodGet, in.url("/api/v1/ping"), nil)
				if err != nil {
					other <- err.Error()
					return
				}
				req.Header.Set("X-API-Key", hex.EncodeToString(key))
				resp, err := hc.Do(req)
				if err != nil {
					other <- err.Error()
					return
				}
				_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
				resp.Body.Close()
				if resp.StatusCode != http.StatusUnauthorized {
					other <- fmt.Sprintf("status %d", resp.StatusCode)
					return
				}
				unauthorized.Add(1)
			}
		}()
	}
	wg.Wait()
	close(other)
	for o := range other {
		t.Errorf("a random key got %s", o)
	}
	require.NoError(t, ctx.Err(), "10,000 requests did not finish within the bound")
	t.Logf("%d requests with random keys in %v", requests, time.Since(start).Round(time.Millisecond))
	assert.Equal(t, int64(requests), unauthorized.Load(), "every random key is refused")
	assert.Zero(t, dbSize(t, rs), "no Redis key for an unverified client")
	assert.Zero(t, commandCalls(t, rs, "evalsha")+commandCalls(t, rs, "eval"), "no evaluation ran")
	assert.Contains(t, call(t, http.MethodGet, in.url("/metrics")).body, `tlb_identity_refusals_total{status="401"} 10000`)

	// The verified key is the subject: the global policy's 10, then 429.
	codes := map[int]int{}
	for range 12 {
		r := call(t, http.MethodGet, in.url("/api/v1/ping"), "X-API-Key", goodKey)
		codes[r.status]++
	}
	assert.Equal(t, map[int]int{200: 10, 429: 2}, codes)
	assert.Positive(t, dbSize(t, rs), "the verified client has state: the check above could fail")
	assert.NotContains(t, in.logs(), goodKey, "a key is never logged")
}

// TestE2EAPIKeysReloadOnSIGHUP: a key added to the file is accepted after
// SIGHUP; a broken file on the next SIGHUP keeps the set.
func TestE2EAPIKeysReloadOnSIGHUP(t *testing.T) {
	rs := redistest.Start(t)
	keysFile := filepath.Join(t.TempDir(), "api-keys")
	writeKeysFile(t, keysFile, "key-one")
	in := startInstance(t, apiKeyEnv(t, rs.Addr(), keysFile))
	require.Equal(t, http.StatusOK, call(t, http.MethodGet, in.url("/api/v1/ping"), "X-API-Key", "key-one").status)
	r := call(t, http.MethodGet, in.url("/api/v1/ping"), "X-API-Key", "key-two")
	require.Equal(t, http.StatusUnauthorized, r.status)
	assert.Equal(t, "application/problem+json", r.header.Get("Content-Type"))
	assert.Contains(t, r.body, `"status":401`)

	waitStatus := func(key string, want int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			got := call(t, http.MethodGet, in.url("/api/v1/ping"), "X-API-Key", key).status
			if got == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("key %s: status %d, want %d within 10s of SIGHUP\n%s", key, got, want, in.logs())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	writeKeysFile(t, keysFile, "key-one", "key-two")
	require.NoError(t, in.cmd.Process.Signal(syscall.SIGHUP))
	waitStatus("key-two", http.StatusOK)

	require.NoError(t, os.WriteFile(keysFile, []byte("not a digest\n"), 0o600))
	require.NoError(t, in.cmd.Process.Signal(syscall.SIGHUP))
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(in.logs(), "api keys reload failed") {
		require.True(t, time.Now().Before(deadline), "no reload failure logged within 10s\n%s", in.logs())
		time.Sleep(50 * time.Millisecond)
	}
	assert.Equal(t, http.StatusOK, call(t, http.MethodGet, in.url("/api/v1/ping"), "X-API-Key", "key-two").status, "a broken file keeps the previous set")
	assert.Contains(t, in.logs(), "APP_WEB_API_KEYS_FILE")
	assert.NotContains(t, in.logs(), "key-two")
}

// TestE2ETrustedHeaderFromUntrustedPeer: with trusted-header identity, a
// principal header from a peer that is not a trusted proxy is ignored: the
// test (127.0.0.1, not trusted) rotating the header is one client. From a
// trusted proxy the header is the identity.
func TestE2ETrustedHeaderFromUntrustedPeer(t *testing.T) {
	rotate := func(t *testing.T, in *instance) map[int]int {
		codes := map[int]int{}
		for i := range 15 {
			r := call(t, http.MethodGet, in.url("/api/v1/ping"), "X-Authenticated-User", fmt.Sprintf("user-%d", i))
			codes[r.status]++
		}
		return codes
	}
	t.Run("untrusted peer", func(t *testing.T) {
		rs := redistest.Start(t)
		env := append(enabledEnv(t, rs.Addr()), "APP_WEB_IDENTITY=trusted-header", "APP_WEB_IDENTITY_HEADER=X-Authenticated-User")
		env = append(env, "APP_WEB_TRUSTED_PROXIES=192.0.2.1") // later entries win over enabledEnv's loopback
		in := startInstance(t, env)
		assert.Equal(t, map[int]int{200: 10, 429: 5}, rotate(t, in), "one client: the peer's address")
	})
	t.Run("trusted proxy", func(t *testing.T) {
		rs := redistest.Start(t)
		env := append(enabledEnv(t, rs.Addr()), "APP_WEB_IDENTITY=trusted-header", "APP_WEB_IDENTITY_HEADER=X-Authenticated-User")
		in := startInstance(t, env) // enabledEnv trusts 127.0.0.1
		assert.Equal(t, map[int]int{200: 15}, rotate(t, in), "each principal its own budget")
	})
}

// TestE2EIdentityConfigErrors: an incomplete identity set-up stops start-up
// with one line naming the variable.
func TestE2EIdentityConfigErrors(t *testing.T) {
	bin := binary(t)
	bad := filepath.Join(t.TempDir(), "keys")
	require.NoError(t, os.WriteFile(bad, []byte(subject.DigestAPIKey("k").String()+"\nraw-key-pasted-here\n"), 0o600))
	for _, c := range []struct {
		env  []string
		want string
	}{
		{[]string{"APP_WEB_IDENTITY", "api-key"}, "tech-log-backend: config: APP_WEB_API_KEYS_FILE: is required: "},
		{[]string{"APP_WEB_IDENTITY", "api-key", "APP_WEB_API_KEYS_FILE", bad}, "tech-log-backend: config: APP_WEB_API_KEYS_FILE: is invalid: " + bad + ": line 2: "},
		{[]string{"APP_WEB_IDENTITY", "trusted-header", "APP_WEB_IDENTITY_HEADER", "X-User"}, "tech-log-backend: config: APP_WEB_TRUSTED_PROXIES: is required: "},
		{[]string{"APP_WEB_IDENTITY", "cookie"}, "tech-log-backend: config: APP_WEB_IDENTITY: is not supported: "},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), startWait)
		cmd := exec.CommandContext(ctx, bin)
		cmd.Env = baseEnv(c.env...)
		out, err := cmd.CombinedOutput()
		cancel()
		var exit *exec.ExitError
		require.True(t, errors.As(err, &exit), "%v: want a non-zero exit, got %v\n%s", c.env, err, out)
		assert.Equal(t, 2, exit.ExitCode())
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		require.Len(t, lines, 1, "%s", out)
		assert.True(t, strings.HasPrefix(lines[0], c.want), "%q", lines[0])
		assert.NotContains(t, string(out), "raw-key-pasted-here")
	}
}
