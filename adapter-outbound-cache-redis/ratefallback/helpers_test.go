package ratefallback_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/ratefallback"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redisrate"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
	"github.com/tech-log/tech-log-backend/shared-contract/keyspace"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit/ratelimittest"
)

// randomKeys is the test's own corner of the keyspace (redistest).
func randomKeys(t testing.TB) *keyspace.Builder { return redistest.RandomKeys(t) }

func randomSubject(t testing.TB) ratelimit.SubjectDigest { return ratelimittest.Subject(t) }

// localPolicy is a local-fallback policy for instances (fail-closed
// when 0), with maxCost.
func localPolicy(t testing.TB, id ratelimit.PolicyID, params ratelimit.Params, maxCost int64, instances int64) ratelimit.Policy {
	t.Helper()
	spec := ratelimit.PolicySpec{ID: id, Revision: 1, Algorithm: params.Algorithm(), Params: params, MaxCost: maxCost,
		CleanupGrace: time.Minute, MaxClockRegression: 2 * time.Second, FailurePolicy: ratelimit.FailClosed}
	if instances > 0 {
		spec.FailurePolicy, spec.FallbackInstances = ratelimit.LocalFallback, instances
	}
	p, err := ratelimit.NewPolicy(spec)
	require.NoError(t, err)
	return p
}

// provider builds and starts a provider on srv at the default timeouts,
// with the default breaker (threshold 0 turns it off).
func provider(t testing.TB, srv *redistest.Server, keys *keyspace.Builder, pols []ratelimit.Policy, threshold int) *redisrate.Provider {
	t.Helper()
	client, err := redisrate.NewClient(redisrate.ClientConfig{
		Addr: srv.Addr(), Protocol: redisrate.ProtocolRESP2, CommandTimeout: redisrate.DefaultCommandTimeout,
		DialTimeout: redisrate.DefaultDialTimeout, PoolSize: 8, PoolTimeout: redisrate.DefaultCommandTimeout,
	})
	require.NoError(t, err)
	var br redisrate.BreakerOptions
	if threshold > 0 {
		br = redisrate.BreakerOptions{Threshold: threshold, ProbeInterval: redisrate.DefaultBreakerProbeInterval}
	}
	p, err := redisrate.New(client, keys, pols, redisrate.Options{CommandTimeout: redisrate.DefaultCommandTimeout, MaxInFlight: 8, Breaker: br})
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, p.Start(ctx))
	return p
}

// fallback builds the fallback over p (closed at cleanup).
func fallback(t testing.TB, p ratefallback.Provider, pols []ratelimit.Policy, mutate func(*ratefallback.Options)) *ratefallback.Fallback {
	t.Helper()
	opts := ratefallback.Options{Policies: pols, CommandTimeout: redisrate.DefaultCommandTimeout}
	if mutate != nil {
		mutate(&opts)
	}
	fb, err := ratefallback.New(p, opts)
	require.NoError(t, err)
	t.Cleanup(fb.Close)
	return fb
}

func ask(p ratelimit.EdgePort, id ratelimit.PolicyID, subject ratelimit.SubjectDigest, cost int64) ratelimit.Outcome {
	return p.Evaluate(context.Background(), ratelimit.Request{PolicyID: id, SubjectDigest: subject, Cost: cost,
		Deadline: time.Now().Add(redisrate.EvaluationTimeout(redisrate.DefaultCommandTimeout, false))})
}
