package ratedenial_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/ratedenial"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redisrate"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit/ratelimittest"
)

// clientConfig is the test's client configuration for a topology (no
// address: the topology's constructor finds the nodes).
func clientConfig() redisrate.ClientConfig {
	return redisrate.ClientConfig{Protocol: redisrate.ProtocolRESP2, CommandTimeout: redisrate.DefaultCommandTimeout,
		DialTimeout: redisrate.DefaultDialTimeout, PoolSize: 8, PoolTimeout: redisrate.DefaultCommandTimeout}
}

// TestInvalidationReachesEveryClusterNode: a cache subscribed through a
// cluster client receives a reset published on any primary (PUBLISH is
// carried over the cluster bus), each within a second.
func TestInvalidationReachesEveryClusterNode(t *testing.T) {
	cl := redistest.StartCluster(t, redistest.WithReplicasPerPrimary(0))
	cc, err := redisrate.NewClusterClient(clientConfig(), cl.Addrs())
	require.NoError(t, err)
	t.Cleanup(func() { _ = cc.Close() })
	p := policy(t, "p", 1, ratelimit.FixedWindow{Limit: 1, Window: time.Hour}, 1)
	c := cache(t, &ratelimittestDenyAll{p: p}, ratedenial.Options{Policies: []ratelimit.Policy{p}, Keys: randomKeys(t), Client: cc, Heartbeat: 100 * time.Millisecond})
	waitLive(t, c)
	for i, n := range cl.Primaries() {
		_, err := ratedenial.Publish(context.Background(), n.Client(), "some-reset-key")
		require.NoError(t, err)
		require.Eventually(t, func() bool { return c.Stats().Invalidations == uint64(i+1) }, time.Second, time.Millisecond,
			"a reset published on primary %s did not arrive within a second", n.Addr())
	}
	require.True(t, c.Stats().Live)
}

// TestSubscriptionFollowsSentinelFailover: after a Sentinel failover the
// cache is subscribed where resets are published (go-redis's failover
// client leaves a subscription on the demoted primary; the cache's own
// heartbeat, published through the client to the new primary, notices it
// and resubscribes), and a reset published on the new primary arrives.
func TestSubscriptionFollowsSentinelFailover(t *testing.T) {
	s := redistest.StartSentinel(t)
	fc, err := redisrate.NewFailoverClient(clientConfig(), redisrate.SentinelConfig{MasterName: s.MasterName(), Addrs: s.SentinelAddrs()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = fc.Close() })
	p := policy(t, "p", 1, ratelimit.FixedWindow{Limit: 1, Window: time.Hour}, 1)
	c := cache(t, &ratelimittestDenyAll{p: p}, ratedenial.Options{Policies: []ratelimit.Policy{p}, Keys: randomKeys(t), Client: fc, Heartbeat: 100 * time.Millisecond})
	waitLive(t, c)

	primary := s.Failover()
	// Bounded: the client learns the new primary from the sentinels, the
	// heartbeat ends the stale session within two heartbeats, the next
	// session subscribes on the new primary.
	deadline := time.Now().Add(15 * time.Second)
	received := c.Stats().Invalidations
	for c.Stats().Invalidations == received {
		require.True(t, time.Now().Before(deadline), "no reset published on the new primary %s arrived within 15 s of the failover", primary.Addr())
		_, err := ratedenial.Publish(context.Background(), primary.Client(), "some-reset-key")
		require.NoError(t, err)
		time.Sleep(50 * time.Millisecond)
	}
}

// ratelimittestDenyAll denies everything (the topology tests exercise the
// subscription only).
type ratelimittestDenyAll struct {
	ratelimittest.Fake // sets and refunds: the zero Fake's refusals
	p                  ratelimit.Policy
}

func (d *ratelimittestDenyAll) Evaluate(_ context.Context, req ratelimit.Request) ratelimit.Outcome {
	return ratelimit.Evaluated{Decision: ratelimit.Decision{Limit: d.p.Limit(), RetryAfter: time.Second,
		PolicyID: req.PolicyID, PolicyRevision: d.p.Revision(), Source: ratelimit.GlobalRedis, Certainty: ratelimit.Certain}}
}
