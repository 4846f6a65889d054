package main_test

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit/ratelimittest"
)

// setE2EPolicies: GET /api/v1/ping is limited by a policy set (ADR
// 0027): 3 per client, 1,000 per client, and 5 for all clients together
// (global, listed first to show that subject members are decided first).
// Hour windows: no boundary resets a count mid-test.
const setE2EPolicies = `{"policies": [
  {"id": "backend", "revision": 1, "algorithm": "fixed_window", "scope": "global",
   "limit": 5, "window": "1h", "maxCost": 1, "cleanupGrace": "1m", "maxClockRegression": "2s",
   "failurePolicy": "fail-closed", "routes": ["GET /api/v1/ping"]},
  {"id": "per-client", "revision": 1, "algorithm": "fixed_window",
   "limit": 3, "window": "1h", "maxCost": 1, "cleanupGrace": "1m", "maxClockRegression": "2s",
   "failurePolicy": "fail-closed", "routes": ["GET /api/v1/ping"]},
  {"id": "per-client-day", "revision": 1, "algorithm": "token_bucket",
   "capacity": 1000, "refillTokens": 1000, "refillPeriod": "24h", "maxCost": 1, "cleanupGrace": "1m", "maxClockRegression": "2s",
   "failurePolicy": "fail-closed", "routes": ["GET /api/v1/ping"]}
]}`

// TestE2EPolicySetAllOrNothing: two instances share one Redis. Client A
// spends its 3 and is then denied 20 times by its per-client member; those
// denials take nothing of the global member, so client B still gets the 2
// requests left of the global 5, and is then denied by the global member.
func TestE2EPolicySetAllOrNothing(t *testing.T) {
	// Hour windows: no run may cross an hour's end (a minute is margin).
	ratelimittest.ClearOfWindowEnd(t, time.Hour, time.Minute)
	rs := redistest.Start(t)
	policies := filepath.Join(t.TempDir(), "set-policies.json")
	require.NoError(t, os.WriteFile(policies, []byte(setE2EPolicies), 0o600))
	env := append(enabledEnv(t, rs.Addr()), "APP_RATE_LIMIT_POLICIES_FILE="+policies, "APP_RATE_LIMIT_DEFAULT_POLICY=per-client")
	a, b := startInstance(t, env), startInstance(t, env)
	in := func(i int) *instance {
		if i%2 == 0 {
			return a
		}
		return b
	}
	const clientA, clientB = "198.51.100.50", "198.51.100.51"
	for i := range 23 {
		r := call(t, http.MethodGet, in(i).url("/api/v1/ping"), "X-Forwarded-For", clientA)
		if i < 3 {
			require.Equal(t, http.StatusOK, r.status, "A's request %d: %s\n%s", i, r.body, in(i).logs())
			assert.Equal(t, `"per-client";q=3;w=3600, "per-client-day";q=1000;w=86400, "backend";q=5;w=3600`, r.header.Get("RateLimit-Policy"), "every member, subject members first")
			continue
		}
		require.Equal(t, http.StatusTooManyRequests, r.status, "A's request %d: %s", i, r.body)
		assert.Regexp(t, `^"per-client";r=0;t=\d+$`, r.header.Get("RateLimit"), "the denying member speaks")
		assert.NotEmpty(t, r.header.Get("Retry-After"))
	}
	for i, want := range []int{http.StatusOK, http.StatusOK, http.StatusTooManyRequests} {
		r := call(t, http.MethodGet, in(i).url("/api/v1/ping"), "X-Forwarded-For", clientB)
		require.Equal(t, want, r.status, "B's request %d: the global member has 5 - 3 = 2 left: %s\n%s", i, r.body, in(i).logs())
		if want == http.StatusOK {
			assert.Regexp(t, `^"backend";r=`, r.header.Get("RateLimit"), "the global member has the least left")
		} else {
			assert.Regexp(t, `^"backend";r=0;`, r.header.Get("RateLimit"), "denied by the global member")
		}
	}
}
