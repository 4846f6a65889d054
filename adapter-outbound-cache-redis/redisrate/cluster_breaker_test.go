package redisrate

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
	"github.com/tech-log/tech-log-backend/shared-contract/keyspace"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// subjectOn draws a subject whose state key the cluster serves on owner
// (want true) or on another primary (want false).
func subjectOn(t *testing.T, c *redistest.Cluster, keys *keyspace.Builder, pol ratelimit.Policy, owner *redistest.Server, want bool) ratelimit.SubjectDigest {
	t.Helper()
	for range 1000 {
		s := randomSubject(t)
		k, err := StateKey(keys, pol, s)
		require.NoError(t, err)
		if (c.SlotOwner(keySlot(k)).Addr() == owner.Addr()) == want {
			return s
		}
	}
	t.Fatal("no such subject in 1000 draws")
	return ""
}

// TestClusterBreakerPerPrimary: killing one primary (no replica, partial
// coverage allowed) opens that primary's breaker only. Calls for its slots
// fail (connection, then circuit_open, unsent), while every call for the
// other primaries' slots keeps being decided. The breaker detail names the
// open target by index and slot ranges, never by address.
func TestClusterBreakerPerPrimary(t *testing.T) {
	c := redistest.StartCluster(t, redistest.WithReplicasPerPrimary(0), redistest.WithNodeConfig("cluster-require-full-coverage", "no"))
	keys := randomKeys(t)
	pol := fixedPolicy(t, "perprimary", 1000, time.Hour)
	p := breakerClusterProvider(t, c, keys, pol, clusterConfig(), BreakerOptions{Threshold: 3, ProbeInterval: MaxProbeInterval})

	victim := c.Primaries()[0]
	dead := subjectOn(t, c, keys, pol, victim, true)
	alive := subjectOn(t, c, keys, pol, victim, false)
	for _, s := range []ratelimit.SubjectDigest{dead, alive} {
		_, ok := ask(p, pol.ID(), s, 1).(ratelimit.Evaluated)
		require.True(t, ok)
	}
	require.Equal(t, BreakerClosed, p.BreakerState())
	victim.Kill()

	// Every call for the dead primary's slots fails without a decision;
	// within Threshold failures its breaker opens and later calls are
	// answered circuit_open, unsent. Calls for other slots, interleaved,
	// are all decided.
	var circuitOpen int
	for i := range 20 {
		out := ask(p, pol.ID(), dead, 1)
		require.NotEqual(t, ratelimit.KindEvaluated, out.Kind(), "call %d: %v", i, out)
		if ratelimit.CategoryOf(out) == ratelimit.CategoryCircuitOpen {
			circuitOpen++
		}
		e, ok := ask(p, pol.ID(), alive, 1).(ratelimit.Evaluated)
		require.True(t, ok, "call %d for a live primary: %v", i, e)
		assert.True(t, e.Decision.Allowed)
	}
	assert.GreaterOrEqual(t, circuitOpen, 20-3, "after Threshold failures every call is refused unsent")
	assert.Equal(t, BreakerOpen, p.BreakerState(), "the provider reports the worst target")
	assert.Equal(t, uint64(1), p.BreakerTrips())

	targets := p.BreakerTargets()
	require.Len(t, targets, len(c.Primaries())+1, "the slot map still names the dead primary")
	var open []TargetBreaker
	for _, tb := range targets {
		assert.NotContains(t, tb.Target, ":", "no address")
		assert.NotEmpty(t, tb.Slots)
		if tb.State != BreakerClosed {
			open = append(open, tb)
		}
	}
	require.Len(t, open, 1, "only the dead primary's breaker opened: %+v", targets)
}

// breakerClusterProvider builds and starts a Provider for pol on cluster
// c with client configuration cfg (its CommandTimeout, and its PoolSize as
// MaxInFlight) and breaker.
func breakerClusterProvider(t *testing.T, c *redistest.Cluster, keys *keyspace.Builder, pol ratelimit.Policy, cfg ClientConfig, breaker BreakerOptions) *Provider {
	t.Helper()
	cc, err := NewClusterClient(cfg, c.Addrs())
	require.NoError(t, err)
	p, err := New(cc, keys, []ratelimit.Policy{pol}, Options{CommandTimeout: cfg.CommandTimeout, MaxInFlight: cfg.PoolSize, Breaker: breaker})
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, p.Start(ctx))
	return p
}

// keySlot is the Redis Cluster slot of key.
func keySlot(key string) int { return keyspace.Slot(key) }
