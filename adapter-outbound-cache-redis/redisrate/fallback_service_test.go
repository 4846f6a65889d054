package redisrate

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit/ratelimittest"
)

// TestConformanceFallback runs the EdgePort conformance suite against the
// local emergency fallback (with a breaker) over a healthy real server, the
// kit's policies turned local-fallback: while Redis answers, the decorator
// is the provider.
func TestConformanceFallback(t *testing.T) {
	srv := redistest.Start(t)
	keys := randomKeys(t)
	ratelimittest.Run(t, func(t *testing.T, policies []ratelimit.Policy) ratelimit.EdgePort {
		local := make([]ratelimit.Policy, 0, len(policies))
		for _, p := range policies {
			lp, err := ratelimit.NewPolicy(ratelimit.PolicySpec{
				ID: p.ID(), Revision: p.Revision(), Algorithm: p.Algorithm(), Params: p.Params(), MaxCost: p.MaxCost(),
				CleanupGrace: p.CleanupGrace(), MaxClockRegression: p.MaxClockRegression(),
				FailurePolicy: ratelimit.LocalFallback, FallbackInstances: 2,
			})
			require.NoError(t, err)
			local = append(local, lp)
		}
		cfg := serviceConfig(srv)
		client, err := NewClient(cfg)
		require.NoError(t, err)
		p, err := New(client, keys, local, Options{CommandTimeout: cfg.CommandTimeout, MaxInFlight: cfg.PoolSize,
			Breaker: BreakerOptions{Threshold: 3, ProbeInterval: time.Second}})
		require.NoError(t, err)
		fb, err := NewFallback(p, FallbackOptions{})
		require.NoError(t, err)
		t.Cleanup(func() {
			fb.Close()
			_ = p.Close()
		})
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		require.NoError(t, p.Start(ctx))
		return fb
	})
}
