package ratelimit_test

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

func TestParseAlgorithm(t *testing.T) {
	for _, a := range []ratelimit.Algorithm{ratelimit.AlgorithmFixedWindow, ratelimit.AlgorithmSlidingWindowCounter, ratelimit.AlgorithmTokenBucket, ratelimit.AlgorithmGCRA, ratelimit.AlgorithmSlidingLog, ratelimit.AlgorithmLeakyBucket, ratelimit.AlgorithmConcurrency} {
		got, err := ratelimit.ParseAlgorithm(a.String())
		require.NoError(t, err)
		assert.Equal(t, a, got)
		assert.True(t, a.Valid())
	}
	for _, s := range []string{"", "fixed-window", "Fixed_Window", "FIXED_WINDOW", "token_bucket ", "sliding-log", "Sliding_Log", "GCRA", "gcra ", "leaky-bucket", "Leaky_Bucket", "Algorithm(1)", "1"} {
		t.Run("reject "+s, func(t *testing.T) {
			a, err := ratelimit.ParseAlgorithm(s)
			assert.ErrorIs(t, err, ratelimit.ErrUnsupported)
			assert.Equal(t, ratelimit.Algorithm(0), a)
		})
	}
}

func TestParseFailurePolicy(t *testing.T) {
	got, err := ratelimit.ParseFailurePolicy("fail-closed")
	require.NoError(t, err)
	assert.Equal(t, ratelimit.FailClosed, got)
	// fail-open parses, so that NewPolicy can reject it by name.
	got, err = ratelimit.ParseFailurePolicy("fail-open")
	require.NoError(t, err)
	assert.Equal(t, ratelimit.FailOpen, got)
	for _, s := range []string{"", "fail_closed", "FAIL_CLOSED", "closed", "fail-closed ", "open"} {
		t.Run("reject "+s, func(t *testing.T) {
			f, err := ratelimit.ParseFailurePolicy(s)
			assert.ErrorIs(t, err, ratelimit.ErrUnsupported)
			assert.Equal(t, ratelimit.FailurePolicy(0), f)
		})
	}
}

// TestEnumZeroValuesInvalid: no enum silently defaults.
func TestEnumZeroValuesInvalid(t *testing.T) {
	var a ratelimit.Algorithm
	assert.False(t, a.Valid())
	assert.False(t, ratelimit.Algorithm(8).Valid())
	assert.False(t, ratelimit.Algorithm(-1).Valid())
	assert.Equal(t, "Algorithm(0)", a.String())
	assert.Equal(t, "FailurePolicy(0)", ratelimit.FailurePolicy(0).String())
	assert.Equal(t, "Source(0)", ratelimit.Source(0).String())
	assert.Equal(t, "Certainty(0)", ratelimit.Certainty(0).String())
	assert.Equal(t, "fail-closed", ratelimit.FailClosed.String())
	assert.Equal(t, "fail-open", ratelimit.FailOpen.String())
	assert.Equal(t, "global_redis", ratelimit.GlobalRedis.String())
	assert.Equal(t, "certain", ratelimit.Certain.String())
	assert.Equal(t, "approximate_algorithm", ratelimit.ApproximateAlgorithm.String())
	assert.NotZero(t, ratelimit.GlobalRedis)
	assert.NotZero(t, ratelimit.Certain)
	assert.NotZero(t, ratelimit.FailClosed)
	// The zero Request is invalid.
	assert.Error(t, ratelimit.Request{}.Validate())
	// The zero spec is invalid.
	_, err := ratelimit.NewPolicy(ratelimit.PolicySpec{})
	assert.Error(t, err)
}

func TestParsePolicyID(t *testing.T) {
	id, err := ratelimit.ParsePolicyID("login")
	require.NoError(t, err)
	assert.Equal(t, ratelimit.PolicyID("login"), id)
	_, err = ratelimit.ParsePolicyID("Login")
	assert.ErrorIs(t, err, ratelimit.ErrInvalidPolicyID)
	// A long invalid id is bounded in the message.
	_, err = ratelimit.ParsePolicyID(strings.Repeat("X", 500))
	require.Error(t, err)
	assert.Less(t, len(err.Error()), 200)
	assert.True(t, errors.Is(err, ratelimit.ErrInvalidPolicyID))
}

// TestNewPolicyTokenBucketReducedRate: T1 is checked on the rate reduced by
// gcd(refillTokens, refillPeriod ms). 1e9 tokens per 24h is the rate 625 per
// 54ms; both are accepted and the programs receive the reduced form. A rate
// that already satisfies T1 keeps its own form (the programs store the
// sub-token remainder in 1/P units, so state written before keeps its unit),
// and a rate whose reduced form is still out of range is rejected.
func TestNewPolicyTokenBucketReducedRate(t *testing.T) {
	const capacity = 1_000_000_000
	day := mustPolicy(t, bucketSpec(capacity, 1_000_000_000, 24*time.Hour, 1))
	short := mustPolicy(t, bucketSpec(capacity, 625, 54*ms, 1))
	want := ratelimit.TokenBucket{Capacity: capacity, RefillTokens: 625, RefillPeriod: 54 * ms}
	assert.Equal(t, want, day.Params(), "1e9 per 24h is held as the reduced rate")
	assert.Equal(t, want, short.Params())

	kept := mustPolicy(t, bucketSpec(100, 10, time.Second, 1))
	assert.Equal(t, ratelimit.TokenBucket{Capacity: 100, RefillTokens: 10, RefillPeriod: time.Second}, kept.Params(),
		"a rate inside T1 is not rewritten")

	// gcd(2^40+1, 2) = 1: nothing to reduce, C*P = 2^53.
	_, err := ratelimit.NewPolicy(bucketSpec(1<<52, 1<<40+1, 2*ms, 1))
	require.ErrorIs(t, err, ratelimit.ErrArithmeticRange)
	assert.Contains(t, err.Error(), "Params.Capacity")
}

// TestNewPolicyDedupWindow: a dedup window is kept in whole milliseconds, 0
// means off, and MaxDedupWindow itself is accepted.
func TestNewPolicyDedupWindow(t *testing.T) {
	for _, w := range []time.Duration{0, time.Millisecond, 10 * time.Minute, ratelimit.MaxDedupWindow} {
		spec := fixedSpec(10, time.Second, 5)
		spec.DedupWindow = w
		p, err := ratelimit.NewPolicy(spec)
		require.NoError(t, err, w)
		assert.Equal(t, w, p.DedupWindow())
		assert.True(t, oracleAccepts(spec))
		if w == 0 {
			assert.Zero(t, p.DedupMaxReplays(), "no window, no replays")
		} else {
			assert.Equal(t, int64(ratelimit.DefaultDedupMaxReplays), p.DedupMaxReplays(), "the default")
		}
	}
}

// replays is a *int64 for PolicySpec.DedupMaxReplays.
func replays(n int64) *int64 { return &n }

// TestNewPolicyDedupMaxReplays: 0..MaxDedupMaxReplays are kept with a dedup
// window, and the spec's later changes do not reach the policy.
func TestNewPolicyDedupMaxReplays(t *testing.T) {
	for _, n := range []int64{0, 1, 2, ratelimit.MaxDedupMaxReplays} {
		spec := fixedSpec(10, time.Second, 5)
		spec.DedupWindow = time.Minute
		spec.DedupMaxReplays = replays(n)
		p, err := ratelimit.NewPolicy(spec)
		require.NoError(t, err, n)
		assert.Equal(t, n, p.DedupMaxReplays())
		assert.True(t, oracleAccepts(spec))
		*spec.DedupMaxReplays = 5
		assert.Equal(t, n, p.DedupMaxReplays(), "NewPolicy copies the value")
	}
}

// TestLeakyBucketPolicy: a leaky bucket (ADR 0028) is GCRA with a burst of
// QueueSize+1, and every queue field is checked: DelayAfter within
// 0..QueueSize, a MaxDelay that covers the longest delay, no dedup window.
func TestLeakyBucketPolicy(t *testing.T) {
	spec := func(q ratelimit.LeakyBucket) ratelimit.PolicySpec {
		return ratelimit.PolicySpec{ID: "queue", Revision: 1, Algorithm: ratelimit.AlgorithmLeakyBucket, Params: q, MaxCost: 1,
			CleanupGrace: time.Second, FailurePolicy: ratelimit.FailClosed}
	}
	issue := ratelimit.LeakyBucket{Rate: 10, Period: time.Second, QueueSize: 20, MaxDelay: 2 * time.Second}
	assert.Equal(t, 2*time.Second, issue.LongestDelay(), "20 waiting, 100 ms apart")
	p, err := ratelimit.NewPolicy(spec(issue))
	require.NoError(t, err)
	assert.Equal(t, int64(21), p.Limit())
	assert.Equal(t, ratelimit.Certain, p.Certainty())
	rate, per, burst, ok := p.Emission()
	require.True(t, ok)
	assert.Equal(t, []int64{1, 100_000, 21}, []int64{rate, per, burst}, "emission 100 ms, burst queueSize+1")
	delayAfter, maxDelay, ok := p.Queue()
	require.True(t, ok)
	assert.Equal(t, int64(0), delayAfter)
	assert.Equal(t, 2*time.Second, maxDelay)
	gspec := spec(issue)
	gspec.Algorithm, gspec.Params = ratelimit.AlgorithmGCRA, ratelimit.GCRA{Rate: 1, Period: time.Second, Burst: 1}
	_, _, ok = mustPolicy(t, gspec).Queue()
	assert.False(t, ok, "only a leaky bucket has a queue")

	nginx := issue
	nginx.DelayAfter, nginx.MaxDelay = 8, 1200*time.Millisecond
	assert.Equal(t, 1200*time.Millisecond, nginx.LongestDelay(), "the first 8 go at once")
	_, err = ratelimit.NewPolicy(spec(nginx))
	require.NoError(t, err)

	for name, tc := range map[string]struct {
		q     ratelimit.LeakyBucket
		field string
	}{
		"negative queue":         {ratelimit.LeakyBucket{Rate: 1, Period: time.Second, QueueSize: -1}, "Params.QueueSize"},
		"queue at M":             {ratelimit.LeakyBucket{Rate: 1, Period: time.Second, QueueSize: ratelimit.MaxExactInt, DelayAfter: ratelimit.MaxExactInt, MaxDelay: time.Hour}, "Params.QueueSize"},
		"queue at MaxInt64":      {ratelimit.LeakyBucket{Rate: 1, Period: time.Second, QueueSize: math.MaxInt64, DelayAfter: math.MaxInt64, MaxDelay: time.Hour}, "Params.QueueSize"},
		"delayAfter above queue": {ratelimit.LeakyBucket{Rate: 1, Period: time.Second, QueueSize: 2, DelayAfter: 3}, "Params.DelayAfter"},
		"negative delayAfter":    {ratelimit.LeakyBucket{Rate: 1, Period: time.Second, QueueSize: 2, DelayAfter: -1}, "Params.DelayAfter"},
		"maxDelay below longest": {ratelimit.LeakyBucket{Rate: 10, Period: time.Second, QueueSize: 20, MaxDelay: 1999 * time.Millisecond}, "Params.MaxDelay"},
		"maxDelay not whole ms":  {ratelimit.LeakyBucket{Rate: 10, Period: time.Second, QueueSize: 0, MaxDelay: time.Microsecond}, "Params.MaxDelay"},
		"zero rate":              {ratelimit.LeakyBucket{Rate: 0, Period: time.Second, QueueSize: 1, MaxDelay: time.Hour}, "Params.Rate"},
		"period not whole ms":    {ratelimit.LeakyBucket{Rate: 1, Period: time.Microsecond, QueueSize: 1, MaxDelay: time.Hour}, "Params.Period"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ratelimit.NewPolicy(spec(tc.q))
			var pe *ratelimit.PolicyError
			require.ErrorAs(t, err, &pe)
			assert.Equal(t, tc.field, pe.Field, "%v", err)
		})
	}
	withDedup := spec(issue)
	withDedup.DedupWindow = time.Minute
	_, err = ratelimit.NewPolicy(withDedup)
	require.ErrorIs(t, err, ratelimit.ErrUnsupported, "a replay would skip the queue")
	withCost := spec(issue)
	withCost.MaxCost = 22
	_, err = ratelimit.NewPolicy(withCost)
	require.ErrorIs(t, err, ratelimit.ErrMaxCostAboveLimit, "a cost above queueSize+1 could never be admitted")
}
