package ratelimit_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// TestPolicyCodecRoundTrip: every algorithm's policy, with the optional
// fields set, decodes to an equal policy; bad encodings are refused.
func TestPolicyCodecRoundTrip(t *testing.T) {
	replays := int64(3)
	specs := []ratelimit.PolicySpec{
		{ID: "fw", Revision: 2, Algorithm: ratelimit.AlgorithmFixedWindow, Params: ratelimit.FixedWindow{Limit: 10, Window: time.Minute}, MaxCost: 2,
			CleanupGrace: time.Second, MaxClockRegression: time.Second, FailurePolicy: ratelimit.LocalFallback, FallbackInstances: 3},
		{ID: "swc", Revision: 1, Algorithm: ratelimit.AlgorithmSlidingWindowCounter, Params: ratelimit.SlidingWindowCounter{Limit: 10, Window: time.Minute}, MaxCost: 1,
			CleanupGrace: time.Second, FailurePolicy: ratelimit.FailClosed, DedupWindow: time.Minute, DedupMaxReplays: &replays},
		{ID: "tb", Revision: 7, Algorithm: ratelimit.AlgorithmTokenBucket, Params: ratelimit.TokenBucket{Capacity: 10, RefillTokens: 2, RefillPeriod: time.Second}, MaxCost: 1,
			CleanupGrace: time.Second, FailurePolicy: ratelimit.FailClosed, Scope: ratelimit.ScopeGlobal},
		{ID: "gcra", Revision: 1, Algorithm: ratelimit.AlgorithmGCRA, Params: ratelimit.GCRA{Rate: 10, Period: time.Second, Burst: 5}, MaxCost: 1,
			CleanupGrace: time.Second, FailurePolicy: ratelimit.FailClosed, Enforcement: ratelimit.Shadow},
		{ID: "log", Revision: 1, Algorithm: ratelimit.AlgorithmSlidingLog, Params: ratelimit.SlidingLog{Limit: 10, Window: time.Minute}, MaxCost: 1, CleanupGrace: time.Second, FailurePolicy: ratelimit.FailClosed},
		{ID: "leased", Revision: 3, Algorithm: ratelimit.AlgorithmFixedWindow, Params: ratelimit.FixedWindow{Limit: 1000, Window: time.Second}, MaxCost: 1, CleanupGrace: time.Second, FailurePolicy: ratelimit.FailClosed,
			Lease: &ratelimit.Lease{MaxShare: 0.05, TTL: 200 * time.Millisecond}},
		{ID: "conc", Revision: 1, Algorithm: ratelimit.AlgorithmConcurrency, Params: ratelimit.Concurrency{Limit: 4, MaxHold: 10 * time.Second}, MaxCost: 1, CleanupGrace: time.Second, FailurePolicy: ratelimit.LocalFallback, FallbackInstances: 2},
		{ID: "lb", Revision: 1, Algorithm: ratelimit.AlgorithmLeakyBucket, Params: ratelimit.LeakyBucket{Rate: 10, Period: time.Second, QueueSize: 5, MaxDelay: time.Second}, MaxCost: 1, CleanupGrace: time.Second, FailurePolicy: ratelimit.FailClosed},
	}
	require.Len(t, specs, len(ratelimit.Algorithms())+1, "one policy per algorithm, and a lease")
	for _, spec := range specs {
		p, err := ratelimit.NewPolicy(spec)
		require.NoError(t, err, spec.ID)
		data, err := ratelimit.MarshalPolicy(p)
		require.NoError(t, err)
		q, err := ratelimit.UnmarshalPolicy(data)
		require.NoError(t, err, string(data))
		assert.Equal(t, p, q, string(data))
	}
	for _, bad := range []string{`{`, `{"algorithm": "nope"}`, `{"algorithm": "fixed_window", "params": {"Limit": "x"}}`} {
		_, err := ratelimit.UnmarshalPolicy([]byte(bad))
		assert.ErrorIs(t, err, ratelimit.ErrPolicyEncoding, bad)
	}
	_, err := ratelimit.UnmarshalPolicy([]byte(`{"id": "x", "revision": 1, "algorithm": "fixed_window", "params": {"Limit": 0, "Window": 1000000000}, "maxCost": 1, "cleanupGrace": 1000000, "failurePolicy": 1}`))
	assert.ErrorIs(t, err, ratelimit.ErrInvalidPolicy, "decoded policies are validated")
}
