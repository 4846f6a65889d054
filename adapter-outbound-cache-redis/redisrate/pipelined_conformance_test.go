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

// TestConformanceRedisPipelined runs the EdgePort conformance suite, every
// algorithm of ratelimittest.Policies (GCRA included, ADR 0021), against a
// provider with pipelined program calls (PipelineMaxBatch) on a real
// server.
func TestConformanceRedisPipelined(t *testing.T) {
	srv := redistest.Start(t)
	keys := randomKeys(t)
	ratelimittest.Run(t, func(t *testing.T, policies []ratelimit.Policy) ratelimit.EdgePort {
		cfg := serviceConfig(srv)
		client, err := NewClient(cfg)
		require.NoError(t, err)
		p, err := New(client, keys, policies, Options{CommandTimeout: cfg.CommandTimeout, MaxInFlight: cfg.PoolSize, PipelineMaxBatch: cfg.PoolSize})
		require.NoError(t, err)
		t.Cleanup(func() { _ = p.Close() })
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		require.NoError(t, p.Start(ctx))
		return p
	})
}
