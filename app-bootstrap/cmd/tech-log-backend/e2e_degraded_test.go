package main_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
)

// TestE2ERedisDownFailsClosed: with the coordination server killed, limited
// routes answer 503 problem+json (never 200, never 429), /readyz is 503 and
// /healthz stays 200.
func TestE2ERedisDownFailsClosed(t *testing.T) {
	rs := redistest.Start(t)
	rs.Require(t, redistest.CapKill)
	in := startInstance(t, enabledEnv(t, rs.Addr()))
	require.Equal(t, http.StatusOK, call(t, http.MethodGet, in.url("/api/v1/ping"), "X-Forwarded-For", "198.51.100.4").status)

	rs.Kill()
	for i := range 3 {
		r := call(t, http.MethodGet, in.url("/api/v1/ping"), "X-Forwarded-For", "198.51.100.4")
		require.Equal(t, http.StatusServiceUnavailable, r.status, "request %d: %s", i, r.body)
		assert.Equal(t, "application/problem+json", r.header.Get("Content-Type"))
		assert.NotEmpty(t, r.header.Get("Retry-After"))
		var problem struct {
			Status   int    `json:"status"`
			Outcome  string `json:"outcome"`
			Category string `json:"category"`
			Policy   string `json:"policy"`
		}
		require.NoError(t, json.Unmarshal([]byte(r.body), &problem), r.body)
		assert.Equal(t, 503, problem.Status)
		assert.Contains(t, []string{"unavailable", "indeterminate"}, problem.Outcome, r.body)
		assert.NotEmpty(t, problem.Category)
		assert.Equal(t, "global", problem.Policy)
		assert.NotContains(t, r.body, "198.51.100.4", "the subject never appears")
	}
	assert.Equal(t, http.StatusServiceUnavailable, call(t, http.MethodGet, in.url("/readyz")).status)
	assert.Equal(t, http.StatusOK, call(t, http.MethodGet, in.url("/healthz")).status)
}

// TestE2EConfigErrorExits2: a broken configuration prints one line per
// problem, each naming its variable, and exits 2 without serving.
func TestE2EConfigErrorExits2(t *testing.T) {
	bin := binary(t)
	ctx, cancel := context.WithTimeout(context.Background(), startWait)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin)
	cmd.Env = baseEnv("APP_RATE_LIMIT_ENABLED", "true", "APP_RATE_LIMIT_PROVIDER", "memcached",
		"APP_RATE_LIMIT_REDIS_ADDR", "127.0.0.1:6399", "APP_RATE_LIMIT_KEY_SECRET", "too-short",
		"APP_RATE_LIMIT_DEFAULT_POLICY", "api", "APP_RATE_LIMIT_POLICIES_FILE", "../../examples/policies.json",
		"APP_WEB_SUBJECT_SECRET", "e2e-subject-secret-0123456789abcdefghijklm")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	require.True(t, errors.As(err, &exit), "want a non-zero exit, got %v\n%s", err, out)
	assert.Equal(t, 2, exit.ExitCode())
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	require.Len(t, lines, 2, "%s", out)
	assert.Equal(t, `tech-log-backend: config: APP_RATE_LIMIT_PROVIDER: is not supported: "memcached": the only provider is "redis"`, lines[0])
	assert.True(t, strings.HasPrefix(lines[1], "tech-log-backend: config: APP_RATE_LIMIT_KEY_SECRET: "), lines[1])
	assert.NotContains(t, string(out), "too-short", "secrets are never printed")
}

// TestE2ELocalLimiterAndGracefulStop: the default configuration (no Redis)
// serves behind the local limiter, and SIGTERM stops it cleanly (exit 0).
func TestE2ELocalLimiterAndGracefulStop(t *testing.T) {
	in := startInstance(t, baseEnv("APP_WEB_LOCAL_LIMIT_BURST", "3", "APP_WEB_LOCAL_LIMIT_RATE", "0.5", "APP_WEB_ADDR", "127.0.0.1:1"))
	statuses := []int{}
	for range 5 {
		statuses = append(statuses, call(t, http.MethodGet, in.url("/api/v1/ping")).status)
	}
	assert.Equal(t, []int{200, 200, 200, 429, 429}, statuses, "burst 3, then the local limiter answers 429")
	r := call(t, http.MethodGet, in.url("/api/v1/ping"))
	require.Equal(t, http.StatusTooManyRequests, r.status)
	assert.Equal(t, `"local";q=3;w=6`, r.header.Get("RateLimit-Policy"), "the local 429 describes its own bucket: burst 3 at 0.5/s")
	assert.Regexp(t, `^"local";r=0;t=[56]$`, r.header.Get("RateLimit"))
	assert.Regexp(t, `^[12]$`, r.header.Get("Retry-After"), "one token at 0.5/s: at most 2s, rounded up")
	assert.Equal(t, http.StatusOK, call(t, http.MethodGet, in.url("/healthz")).status, "health is not limited")
	assert.Contains(t, call(t, http.MethodGet, in.url("/metrics")).body, `tlb_local_limit_responses_total{status="429"} 3`)
	assert.False(t, strings.HasSuffix(in.addr, ":1"), "-addr overrides APP_WEB_ADDR")

	require.NoError(t, in.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-in.done:
	case <-time.After(stopWait):
		t.Fatalf("no exit within %v of SIGTERM", stopWait)
	}
	require.NoError(t, in.err, "graceful stop exits 0\n%s", in.logs())
	assert.Contains(t, in.logs(), `"msg":"stopped"`)
}
