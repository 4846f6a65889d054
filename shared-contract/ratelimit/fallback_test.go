package ratelimit_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

func fallbackSpec(params ratelimit.Params, fp ratelimit.FailurePolicy, n int64) ratelimit.PolicySpec {
	return ratelimit.PolicySpec{
		ID: "fb", Revision: 1, Algorithm: params.Algorithm(), Params: params, MaxCost: 1,
		CleanupGrace: time.Second, MaxClockRegression: time.Second, FailurePolicy: fp, FallbackInstances: n,
	}
}

func TestLocalFallbackPolicy(t *testing.T) {
	tests := []struct {
		params ratelimit.Params
		n      int64
		share  int64
	}{
		{ratelimit.FixedWindow{Limit: 10, Window: time.Second}, 2, 5},
		{ratelimit.FixedWindow{Limit: 10, Window: time.Second}, 3, 3},
		{ratelimit.SlidingWindowCounter{Limit: 10, Window: time.Second}, 1, 10},
		{ratelimit.TokenBucket{Capacity: 5, RefillTokens: 1, RefillPeriod: time.Second}, 8, 1},
		{ratelimit.FixedWindow{Limit: 1, Window: time.Second}, ratelimit.MaxFallbackInstances, 1},
	}
	for _, tt := range tests {
		p, err := ratelimit.NewPolicy(fallbackSpec(tt.params, ratelimit.LocalFallback, tt.n))
		require.NoError(t, err)
		assert.Equal(t, ratelimit.LocalFallback, p.FailurePolicy())
		assert.Equal(t, tt.n, p.FallbackInstances())
		assert.Equal(t, tt.share, p.FallbackShare(), "%v / %d", tt.params, tt.n)
	}
	closed, err := ratelimit.NewPolicy(fallbackSpec(ratelimit.FixedWindow{Limit: 10, Window: time.Second}, ratelimit.FailClosed, 0))
	require.NoError(t, err)
	assert.Zero(t, closed.FallbackShare(), "fail-closed has no share")
	assert.Zero(t, closed.FallbackInstances())
}

func TestLocalFallbackPolicyRejections(t *testing.T) {
	fw := ratelimit.FixedWindow{Limit: 10, Window: time.Second}
	for _, tt := range []struct {
		fp   ratelimit.FailurePolicy
		n    int64
		want error
	}{
		{ratelimit.LocalFallback, 0, ratelimit.ErrNonPositive},
		{ratelimit.LocalFallback, -1, ratelimit.ErrNonPositive},
		{ratelimit.LocalFallback, ratelimit.MaxFallbackInstances + 1, ratelimit.ErrNonPositive},
		{ratelimit.FailClosed, 2, ratelimit.ErrUnsupported},
	} {
		_, err := ratelimit.NewPolicy(fallbackSpec(fw, tt.fp, tt.n))
		require.ErrorIs(t, err, tt.want, "%v %d", tt.fp, tt.n)
		var pe *ratelimit.PolicyError
		require.ErrorAs(t, err, &pe)
		assert.Equal(t, "FallbackInstances", pe.Field)
	}
}

func TestLocalFallbackNames(t *testing.T) {
	f, err := ratelimit.ParseFailurePolicy("local-fallback")
	require.NoError(t, err)
	assert.Equal(t, ratelimit.LocalFallback, f)
	assert.Equal(t, "local-fallback", ratelimit.LocalFallback.String())
	assert.Equal(t, "local_emergency", ratelimit.LocalEmergency.String())
	assert.Equal(t, "approximate_local", ratelimit.ApproximateLocal.String())
}
