package main_test

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
)

// globalPolicy is a policy file whose default policy, global, admits
// limit requests an hour at revision.
func globalPolicy(limit, revision int) string {
	return fmt.Sprintf(`{"policies": [{"id": "global", "revision": %d, "algorithm": "fixed_window", "limit": %d, "window": "1h", "maxCost": 1, "cleanupGrace": "1m", "maxClockRegression": "2s", "failurePolicy": "fail-closed", "routes": ["GET /api/v1/ping"]}]}`, revision, limit)
}

// waitLog waits, at most bound, for a log line holding every part.
func waitLog(t *testing.T, in *instance, bound time.Duration, parts ...string) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for countLines(in, parts...) == 0 {
		require.True(t, time.Now().Before(deadline), "no log line with %q within %v\n%s", parts, bound, in.logs())
		time.Sleep(20 * time.Millisecond)
	}
}

// TestE2EPolicyReloadOnSIGHUP (issue 36 item 4), through the binary: the
// policy file is a symlink into a directory the file watch does not see,
// so an edit there is served only after SIGHUP, within a second of it,
// logged with trigger signal and counted; a same-revision change on the
// next SIGHUP is refused naming the policy, and the limit keeps serving,
// with what the subject spent under revision 1 carried into revision 2.
func TestE2EPolicyReloadOnSIGHUP(t *testing.T) {
	rs := redistest.Start(t)
	real := filepath.Join(t.TempDir(), "real.json")
	require.NoError(t, os.WriteFile(real, []byte(globalPolicy(1, 1)), 0o600))
	link := filepath.Join(t.TempDir(), "policies.json")
	require.NoError(t, os.Symlink(real, link))
	in := startInstance(t, append(enabledEnv(t, rs.Addr()), "APP_RATE_LIMIT_POLICIES_FILE="+link))
	ping := func() int { return call(t, http.MethodGet, in.url("/api/v1/ping")).status }
	require.Equal(t, []int{200, 429}, []int{ping(), ping()})

	require.NoError(t, os.WriteFile(real, []byte(globalPolicy(3, 2)), 0o600))
	time.Sleep(300 * time.Millisecond) // three debounces: the watch does not see real.json
	require.Equal(t, http.StatusTooManyRequests, ping(), "no reload without SIGHUP")

	require.NoError(t, in.cmd.Process.Signal(syscall.SIGHUP))
	sent := time.Now()
	for ping() != http.StatusOK {
		require.Less(t, time.Since(sent), time.Second, "the raised limit not served within 1 s of SIGHUP\n%s", in.logs())
		time.Sleep(10 * time.Millisecond)
	}
	waitLog(t, in, time.Second, `"msg":"policies reloaded"`, `"trigger":"signal"`)
	assert.Contains(t, call(t, http.MethodGet, in.url("/metrics")).body, `tlb_ratelimit_policy_reloads_total{result="applied",trigger="signal"} 1`)

	require.NoError(t, os.WriteFile(real, []byte(globalPolicy(9, 2)), 0o600))
	require.NoError(t, in.cmd.Process.Signal(syscall.SIGHUP))
	waitLog(t, in, time.Second, "policy reload refused", `policy \"global\": changed without a new revision`)
	assert.Contains(t, call(t, http.MethodGet, in.url("/metrics")).body, `tlb_ratelimit_policy_reloads_total{result="refused",trigger="signal"} 1`)
	assert.Equal(t, []int{200, 429}, []int{ping(), ping()}, "revision 2's limit of 3 still serves: one spent under revision 1 (carried, ADR 0039), one by the wait")
}

// TestE2ENoPolicyFileSIGHUP: without the Redis limiter there is no policy
// file; SIGHUP logs that there is nothing to reload, and the service goes
// on serving.
func TestE2ENoPolicyFileSIGHUP(t *testing.T) {
	in := startInstance(t, baseEnv("APP_WEB_LOCAL_LIMIT_ENABLED", "false"))
	require.NoError(t, in.cmd.Process.Signal(syscall.SIGHUP))
	waitLog(t, in, time.Second, "no policy file to reload", "APP_RATE_LIMIT_POLICIES_FILE")
	assert.Equal(t, http.StatusOK, call(t, http.MethodGet, in.url("/api/v1/ping")).status)
	assert.False(t, strings.Contains(in.logs(), `"level":"ERROR"`), in.logs())
}
