package ratedenial_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/ratedenial"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redisrate"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit/ratelimittest"
)

// TestConformanceOverProvider runs the conformance kit against the cache
// over the provider on a real server, subscribed to invalidations.
func TestConformanceOverProvider(t *testing.T) {
	srv := redistest.Start(t)
	keys := randomKeys(t)
	ratelimittest.Run(t, func(t *testing.T, policies []ratelimit.Policy) ratelimit.EdgePort {
		rc := client(t, srv)
		c := cache(t, provider(t, rc, keys, policies), ratedenial.Options{Policies: policies, Keys: keys, Client: rc})
		waitLive(t, c)
		return c
	})
}

// TestConformanceSetsOverProvider runs the set suite (RunSets) against the
// cache over the provider on a real server.
func TestConformanceSetsOverProvider(t *testing.T) {
	srv := redistest.Start(t)
	keys := randomKeys(t)
	ratelimittest.RunSets(t, func(t *testing.T, policies []ratelimit.Policy) ratelimit.EdgePort {
		rc := client(t, srv)
		c := cache(t, provider(t, rc, keys, policies), ratedenial.Options{Policies: policies, Keys: keys, Client: rc})
		waitLive(t, c)
		return c
	})
}

// waitLive waits (at most 5 s) until c is subscribed.
func waitLive(t testing.TB, c *ratedenial.Cache) {
	t.Helper()
	require.Eventually(t, func() bool { return c.Stats().Live }, 5*time.Second, 5*time.Millisecond, "the cache never subscribed")
}

// TestServerTimeDecides: over the provider on a real server, where the
// server's TIME decides, the cache never answers a request after the
// server's clock has reached the instant the server admits again. Before
// each request the test reads TIME (T); a cached answer with T at or
// after the denial's ServerNow + RetryAfter (the first instant the server
// allows again; no clock regression here) would be a denial the server
// no longer gives. The loop runs until the server admits again.
func TestServerTimeDecides(t *testing.T) {
	srv := redistest.Start(t)
	rc := client(t, srv)
	keys := randomKeys(t)
	pols := []ratelimit.Policy{
		policy(t, "fixed", 1, ratelimit.FixedWindow{Limit: 2, Window: 150 * time.Millisecond}, 2),
		policy(t, "bucket", 1, ratelimit.TokenBucket{Capacity: 2, RefillTokens: 1, RefillPeriod: 60 * time.Millisecond}, 2),
		policy(t, "sliding", 1, ratelimit.SlidingWindowCounter{Limit: 2, Window: 150 * time.Millisecond}, 2),
	}
	p := provider(t, rc, keys, pols)
	c := cache(t, p, ratedenial.Options{Policies: pols, Keys: keys})
	ctx := context.Background()
	for _, pol := range pols {
		t.Run(pol.Algorithm().String(), func(t *testing.T) {
			hits, rounds := 0, 0
			for rounds < 3 {
				s := randomSubject(t)
				d := deny(t, c, pol.ID(), s)
				allowAt := d.ServerNow.Add(d.RetryAfter)
				deadline := time.Now().Add(2 * time.Second)
				for {
					require.True(t, time.Now().Before(deadline), "the server never admitted again")
					now, err := rc.Time(ctx).Result()
					require.NoError(t, err)
					before := c.Stats().Hits
					out := c.Evaluate(ctx, ratelimit.Request{PolicyID: pol.ID(), SubjectDigest: s, Cost: 2, Deadline: time.Now().Add(time.Second)})
					e, ok := out.(ratelimit.Evaluated)
					require.True(t, ok, "outcome %v", out)
					if c.Stats().Hits > before {
						hits++
						require.True(t, now.Before(allowAt), "cached denial at server time %v, the server allows from %v", now.UnixMicro(), allowAt.UnixMicro())
						continue
					}
					if e.Decision.Allowed {
						break
					}
					allowAt = e.Decision.ServerNow.Add(e.Decision.RetryAfter) // a new entry
				}
				rounds++
			}
			assert.Positive(t, hits)
		})
	}
}

// deny spends the subject's limit and returns the server's denial.
func deny(t *testing.T, c ratelimit.EdgePort, id ratelimit.PolicyID, s ratelimit.SubjectDigest) ratelimit.Decision {
	t.Helper()
	for range 10 {
		out := ask(c, id, s, 2)
		e, ok := out.(ratelimit.Evaluated)
		require.True(t, ok, "outcome %v", out)
		if !e.Decision.Allowed {
			return e.Decision
		}
	}
	t.Fatal("never denied")
	return ratelimit.Decision{}
}

// TestResetSeenByAnotherInstance: two instances (each its own client,
// provider and cache, both subscribed) share a server; B caches a denial;
// a reset (the key deleted, then Publish on a third connection, as
// tlbctl reset does) is applied by both within a second: B's next request
// goes to the server and is admitted.
func TestResetSeenByAnotherInstance(t *testing.T) {
	srv := redistest.Start(t)
	keys := randomKeys(t)
	pol := policy(t, "p", 1, ratelimit.FixedWindow{Limit: 1, Window: time.Hour}, 1)
	pols := []ratelimit.Policy{pol}
	var caches []*ratedenial.Cache
	for range 2 {
		rc := client(t, srv)
		c := cache(t, provider(t, rc, keys, pols), ratedenial.Options{Policies: pols, Keys: keys, Client: rc})
		waitLive(t, c)
		caches = append(caches, c)
	}
	a, b := caches[0], caches[1]
	s := randomSubject(t)
	require.True(t, ratelimit.Admitted(ask(a, "p", s, 1)))
	require.False(t, ratelimit.Admitted(ask(b, "p", s, 1)))
	require.False(t, ratelimit.Admitted(ask(b, "p", s, 1)))
	require.Equal(t, uint64(1), b.Stats().Hits, "B answers the denial locally")

	ctx := context.Background()
	key, err := redisrate.StateKey(keys, pol, s)
	require.NoError(t, err)
	ctl := client(t, srv)
	require.NoError(t, ctl.Del(ctx, key).Err())
	n, err := ratedenial.Publish(ctx, ctl, key)
	require.NoError(t, err)
	assert.Equal(t, int64(2), n, "both instances are subscribed")
	published := time.Now()
	require.Eventually(t, func() bool { return b.Stats().Entries == 0 }, time.Second, time.Millisecond, "B did not apply the invalidation within a second")
	t.Logf("B applied it %v after PUBLISH returned", time.Since(published))
	// A receives the same message on its own connection, independently of
	// B: wait for it (bounded) rather than assume it came first.
	require.Eventually(t, func() bool { return a.Stats().Invalidations == 1 }, time.Second, time.Millisecond, "A did not receive the invalidation within a second")
	assert.True(t, ratelimit.Admitted(ask(b, "p", s, 1)), "after the reset B asks the server")
}

// TestLostSubscriptionStopsServing: when the server closes the
// subscription's connection, the cache drops its entries and serves
// nothing until it has subscribed again, which it does by itself.
func TestLostSubscriptionStopsServing(t *testing.T) {
	srv := redistest.Start(t)
	keys := randomKeys(t)
	pol := policy(t, "p", 1, ratelimit.FixedWindow{Limit: 1, Window: time.Hour}, 1)
	pols := []ratelimit.Policy{pol}
	rc := client(t, srv)
	c := cache(t, provider(t, rc, keys, pols), ratedenial.Options{Policies: pols, Keys: keys, Client: rc, Heartbeat: 50 * time.Millisecond})
	waitLive(t, c)
	s := randomSubject(t)
	ask(c, "p", s, 1)
	ask(c, "p", s, 1)
	require.Equal(t, 1, c.Stats().Entries)

	ctx := context.Background()
	require.NoError(t, srv.Client().Do(ctx, "CLIENT", "KILL", "TYPE", "pubsub").Err())
	require.Eventually(t, func() bool { return c.Stats().Entries == 0 }, 2*time.Second, time.Millisecond, "the loss did not clear the cache")
	waitLive(t, c)
	ask(c, "p", s, 1)
	ask(c, "p", s, 1)
	assert.Equal(t, 1, c.Stats().Entries, "records again once subscribed")
	assert.Equal(t, uint64(1), c.Stats().Hits)
}

// TestClosedCacheServesNothing: after Close the cache no longer hears
// resets, so it drops its entries and passes every call to the server.
func TestClosedCacheServesNothing(t *testing.T) {
	srv := redistest.Start(t)
	keys := randomKeys(t)
	pol := policy(t, "p", 1, ratelimit.FixedWindow{Limit: 1, Window: time.Hour}, 1)
	pols := []ratelimit.Policy{pol}
	rc := client(t, srv)
	c := cache(t, provider(t, rc, keys, pols), ratedenial.Options{Policies: pols, Keys: keys, Client: rc})
	waitLive(t, c)
	s := randomSubject(t)
	require.True(t, ratelimit.Admitted(ask(c, "p", s, 1)))
	require.False(t, ratelimit.Admitted(ask(c, "p", s, 1)))
	require.Equal(t, 1, c.Stats().Entries, "the denial is cached while subscribed")

	c.Close()
	assert.Zero(t, c.Stats().Entries, "Close drops the entries")
	assert.False(t, c.Stats().Live)
	hits := c.Stats().Hits
	require.False(t, ratelimit.Admitted(ask(c, "p", s, 1)), "the server still denies")
	assert.Equal(t, hits, c.Stats().Hits, "a closed cache answers nothing itself")
	assert.Zero(t, c.Stats().Entries, "a closed cache records nothing")
}
