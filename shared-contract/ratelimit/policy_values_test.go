package ratelimit_test

import (
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// TestMaxHorizonIsTheLongestDuration: A3 holds by type because every
// time.Duration is at most MaxHorizonMillis whole milliseconds, and A1:
// MaxServerMillis + MaxHorizonMillis <= MaxExactInt.
func TestMaxHorizonIsTheLongestDuration(t *testing.T) {
	assert.Equal(t, time.Duration(math.MaxInt64).Milliseconds(), ratelimit.MaxHorizonMillis)
	assert.LessOrEqual(t, ratelimit.MaxHorizonMillis, int64(math.MaxInt64)/int64(time.Millisecond))
	assert.LessOrEqual(t, add(bigNow, bigHorizon).Cmp(bigMaxExact), 0)
	assert.Equal(t, int64(1)<<53-1, ratelimit.MaxExactInt)
	assert.Equal(t, int64(1)<<45, ratelimit.MaxServerMillis)
	assert.Equal(t, int64(1_000_000), ratelimit.WeightScale)
	// The longest window whose retry (2W) and TTL are representable.
	assert.NotPanics(t, func() { _ = dms(maxM) })
}

func TestPolicyImmutable(t *testing.T) {
	t.Run("no exported fields", func(t *testing.T) {
		typ := reflect.TypeOf(ratelimit.Policy{})
		require.Positive(t, typ.NumField())
		for i := 0; i < typ.NumField(); i++ {
			assert.False(t, typ.Field(i).IsExported(), "Policy.%s is exported", typ.Field(i).Name)
		}
	})
	t.Run("no pointer-receiver methods", func(t *testing.T) {
		// Every method is on the value, so none can modify a Policy.
		assert.Equal(t, reflect.TypeOf(ratelimit.Policy{}).NumMethod(), reflect.TypeOf(&ratelimit.Policy{}).NumMethod())
	})
	t.Run("mutating the spec afterwards changes nothing", func(t *testing.T) {
		spec := withGrace(fixedSpec(10, time.Second, 3), 2*time.Minute)
		spec.MaxClockRegression = time.Second
		p := mustPolicy(t, spec)
		before := snapshot(p)
		spec.ID, spec.Revision, spec.MaxCost = "other", 9, 1
		spec.Params = ratelimit.SlidingWindowCounter{Limit: 99, Window: time.Hour}
		spec.Algorithm = ratelimit.AlgorithmSlidingWindowCounter
		spec.CleanupGrace, spec.MaxClockRegression = time.Hour, time.Hour
		assert.Equal(t, before, snapshot(p))
	})
	t.Run("mutating returned params changes nothing", func(t *testing.T) {
		p := mustPolicy(t, bucketSpec(10, 1, time.Second, 3))
		q, ok := p.Params().(ratelimit.TokenBucket)
		require.True(t, ok)
		q.Capacity = 1_000
		assert.Equal(t, int64(10), p.Limit())
		assert.Equal(t, ratelimit.TokenBucket{Capacity: 10, RefillTokens: 1, RefillPeriod: time.Second}, p.Params())
	})
	t.Run("copies are independent", func(t *testing.T) {
		a := mustPolicy(t, fixedSpec(10, time.Second, 3))
		b := a
		before := snapshot(a)
		assert.Equal(t, before, snapshot(b), "a copy is the same policy")
		b = mustPolicy(t, slidingSpec(20, time.Minute, 4))
		assert.Equal(t, before, snapshot(a))
		assert.NotEqual(t, snapshot(a), snapshot(b))
	})
}

type policySnapshot struct {
	ID         ratelimit.PolicyID
	Revision   int64
	Algorithm  ratelimit.Algorithm
	Params     ratelimit.Params
	Limit      int64
	MaxCost    int64
	Grace      time.Duration
	Regression time.Duration
	Failure    ratelimit.FailurePolicy
	Certainty  ratelimit.Certainty
	String     string
}

func snapshot(p ratelimit.Policy) policySnapshot {
	return policySnapshot{p.ID(), p.Revision(), p.Algorithm(), p.Params(), p.Limit(), p.MaxCost(),
		p.CleanupGrace(), p.MaxClockRegression(), p.FailurePolicy(), p.Certainty(), p.String()}
}

func TestPolicyCertaintyAndLimit(t *testing.T) {
	tests := []struct {
		spec      ratelimit.PolicySpec
		certainty ratelimit.Certainty
		limit     int64
		str       string
	}{
		{fixedSpec(5, time.Minute, 1), ratelimit.Certain, 5, "fixed_window"},
		{slidingSpec(6, time.Minute, 1), ratelimit.ApproximateAlgorithm, 6, "sliding_window_counter"},
		{bucketSpec(7, 1, time.Second, 1), ratelimit.Certain, 7, "token_bucket"},
	}
	for _, tt := range tests {
		t.Run(tt.spec.Algorithm.String(), func(t *testing.T) {
			p := mustPolicy(t, tt.spec)
			assert.Equal(t, tt.certainty, p.Certainty())
			assert.Equal(t, tt.limit, p.Limit())
			assert.Equal(t, tt.str, p.Algorithm().String())
			assert.Contains(t, p.String(), tt.str)
		})
	}
	t.Run("zero policy", func(t *testing.T) {
		var p ratelimit.Policy
		assert.True(t, p.IsZero())
		assert.Equal(t, ratelimit.Algorithm(0), p.Algorithm())
		assert.Equal(t, ratelimit.Certainty(0), p.Certainty())
		assert.Equal(t, ratelimit.FailurePolicy(0), p.FailurePolicy())
		assert.Zero(t, p.Limit())
		assert.Zero(t, p.MaxCost())
		assert.Nil(t, p.Params())
		assert.Equal(t, "Policy(invalid)", p.String())
	})
}
