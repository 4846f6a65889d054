package main_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
)

// dedupE2EPolicies: a limit of 5 (a token bucket refilling 1 per hour, so
// no window boundary resets the count mid-test) with a dedup window and the
// default dedupMaxReplays (1).
const dedupE2EPolicies = `{"policies": [
  {"id": "global", "revision": 1, "algorithm": "token_bucket",
   "capacity": 5, "refillTokens": 1, "refillPeriod": "1h",
   "maxCost": 1, "cleanupGrace": "1m", "maxClockRegression": "2s",
   "failurePolicy": "fail-closed", "dedupWindow": "10m", "routes": ["GET /api/v1/ping"]}
]}`

// TestE2EIdempotencyKeyReplayBound: two processes share one Redis; one
// client sends one Idempotency-Key 40 times, alternating the instance and
// the header's form (bare abc123, quoted "abc123"). Both forms are one key
// and the replay count lives in Redis, so across both instances the handler
// is reached exactly 5 + 1 times: the first use (charged, recorded), one
// free replay (the second use, the other form on the other instance), then
// four reuses charged like new requests; the other 34 are 429.
func TestE2EIdempotencyKeyReplayBound(t *testing.T) {
	rs := redistest.Start(t)
	policies := filepath.Join(t.TempDir(), "dedup-policies.json")
	require.NoError(t, os.WriteFile(policies, []byte(dedupE2EPolicies), 0o600))
	env := append(enabledEnv(t, rs.Addr()), "APP_RATE_LIMIT_POLICIES_FILE="+policies)
	a, b := startInstance(t, env), startInstance(t, env)

	var statuses, remaining []string
	for i := range 40 {
		in, key := a, `abc123`
		if i%2 == 1 {
			in, key = b, `"abc123"`
		}
		r := call(t, http.MethodGet, in.url("/api/v1/ping"), "X-Forwarded-For", "198.51.100.40", "Idempotency-Key", key)
		if r.status != http.StatusOK && r.status != http.StatusTooManyRequests {
			t.Fatalf("request %d: status %d: %s\n%s", i, r.status, r.body, in.logs())
		}
		statuses = append(statuses, strconv.Itoa(r.status))
		remaining = append(remaining, r.header.Get("RateLimit-Remaining"))
	}
	want := []string{"200", "200", "200", "200", "200", "200"}
	wantRemaining := []string{"4", "4", "3", "2", "1", "0"} // the replay repeats the recorded 4
	for range 34 {
		want, wantRemaining = append(want, "429"), append(wantRemaining, "0")
	}
	assert.Equal(t, want, statuses, "the handler is reached limit x (1 + dedupMaxReplays) = 6 times")
	assert.Equal(t, wantRemaining, remaining)

	mb := call(t, http.MethodGet, b.url("/metrics"))
	assert.Contains(t, mb.body, `tlb_ratelimit_dedup_total{policy="global",result="replayed"} 1`+"\n", "the replay was the second use, on b")
	for _, in := range []*instance{a, b} {
		assert.NotContains(t, in.logs(), "abc123", "the key never reaches a log")
	}
}
