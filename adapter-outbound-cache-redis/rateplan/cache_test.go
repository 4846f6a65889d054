package rateplan_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/rateplan"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
	"github.com/tech-log/tech-log-backend/shared-contract/keyspace"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit/ratelimittest"
)

// t0 is the controlled clock's start.
var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// newStore is a store of the test's plans (fixed windows) through its own
// client to srv.
func newStore(t *testing.T, srv *redistest.Server, keys *keyspace.Builder) *rateplan.Store {
	t.Helper()
	alg := algorithms[0]
	pols := []ratelimit.Policy{policy(t, polAPI, alg.Over(freeLimit, period)), policy(t, polAPIFree, alg.Over(freeLimit, period)), policy(t, polAPIGold, alg.Over(goldLimit, period))}
	st, err := rateplan.NewStore(clientAt(t, srv.Addr()), keys, plansOf(t, pols), pols)
	require.NoError(t, err)
	return st
}

// TestCachesSeeAChangeWithinASecond: two instances' caches (each its own
// client) that read no assignment both answer the new plan within a
// second of Store.Set, far inside their TTL: the change is published and
// heard, not waited out.
func TestCachesSeeAChangeWithinASecond(t *testing.T) {
	srv := redistest.Start(t)
	keys := redistest.RandomKeys(t)
	store := newStore(t, srv, keys)
	caches := []*rateplan.Cache{
		newCache(t, rateplan.CacheOptions{Client: clientAt(t, srv.Addr()), Keys: keys, TTL: time.Minute}, true),
		newCache(t, rateplan.CacheOptions{Client: clientAt(t, srv.Addr()), Keys: keys, TTL: time.Minute}, true),
	}
	waitSubscribers(t, srv, int64(len(caches)))
	ctx := redistest.AdminCtx(t)
	s := randomSubject(t)
	for i, c := range caches {
		plan, err := c.PlanOf(ctx, s)
		require.NoError(t, err)
		require.Equal(t, ratelimit.PlanID(""), plan, "cache %d", i)
	}

	start := time.Now()
	ch, err := store.Set(ctx, s, planGold)
	require.NoError(t, err)
	require.GreaterOrEqual(t, ch.Published, int64(len(caches)), "every cache's subscription hears the change")
	seen := make([]time.Duration, len(caches))
	for time.Since(start) < 2*time.Second {
		done := true
		for i, c := range caches {
			if seen[i] > 0 {
				continue
			}
			plan, err := c.PlanOf(ctx, s)
			require.NoError(t, err)
			if plan == planGold {
				seen[i] = time.Since(start)
			} else {
				done = false
			}
		}
		if done {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	for i, d := range seen {
		require.Positive(t, d, "cache %d never saw the change within 2 s", i)
		assert.LessOrEqual(t, d, time.Second, "cache %d saw the change after %v", i, d)
	}
}

// TestCacheRereadsAfterTTL: an entry is served while fresh (a change
// nobody published is not seen) and read again once TTL has passed.
func TestCacheRereadsAfterTTL(t *testing.T) {
	srv := redistest.Start(t)
	keys := redistest.RandomKeys(t)
	store := newStore(t, srv, keys)
	clk := ratelimittest.NewClock(t0)
	// Not started: no invalidation reaches it, only the TTL.
	c := newCache(t, rateplan.CacheOptions{Client: clientAt(t, srv.Addr()), Keys: keys, TTL: 100 * time.Millisecond, Now: clk.Now}, false)
	ctx := redistest.AdminCtx(t)
	s := randomSubject(t)
	_, err := store.Set(ctx, s, planGold)
	require.NoError(t, err)

	steps := []struct {
		advance time.Duration
		setFree bool
		want    ratelimit.PlanID
		hits    uint64
		misses  uint64
	}{
		{0, false, planGold, 0, 1},                     // t0: read
		{0, true, planGold, 1, 1},                      // t0: changed unheard, fresh entry
		{99 * time.Millisecond, false, planGold, 2, 1}, // t0+99ms: still fresh
		{time.Millisecond, false, planFree, 2, 2},      // t0+100ms: expired, read again
		{50 * time.Millisecond, false, planFree, 3, 2}, // the new entry is fresh
	}
	for i, st := range steps {
		clk.Advance(st.advance)
		if st.setFree {
			_, err := store.Set(ctx, s, planFree)
			require.NoError(t, err)
		}
		plan, err := c.PlanOf(ctx, s)
		require.NoError(t, err, "step %d", i)
		require.Equal(t, st.want, plan, "step %d", i)
		stats := c.Stats()
		require.Equal(t, st.hits, stats.Hits, "step %d hits", i)
		require.Equal(t, st.misses, stats.Misses, "step %d misses", i)
	}
}

// TestCacheServesStaleIfError: once the server is gone, an expired entry
// is served (counted Stale), and a subject never read fails (counted
// Errors). The cache's subscription is not started: a lost subscription
// drops every entry (by design), which would race with the read.
func TestCacheServesStaleIfError(t *testing.T) {
	srv := redistest.Start(t)
	srv.Require(t, redistest.CapKill)
	keys := redistest.RandomKeys(t)
	store := newStore(t, srv, keys)
	clk := ratelimittest.NewClock(t0)
	c := newCache(t, rateplan.CacheOptions{Client: clientAt(t, srv.Addr()), Keys: keys, TTL: time.Minute, Now: clk.Now}, false)
	ctx := redistest.AdminCtx(t)
	s := randomSubject(t)
	_, err := store.Set(ctx, s, planGold)
	require.NoError(t, err)
	plan, err := c.PlanOf(ctx, s)
	require.NoError(t, err)
	require.Equal(t, planGold, plan)

	srv.Kill()
	clk.Advance(2 * time.Minute)
	for i := range 2 { // served again: the expired entry is kept
		plan, err = c.PlanOf(ctx, s)
		require.NoError(t, err, "read %d", i)
		require.Equal(t, planGold, plan, "read %d", i)
	}
	_, err = c.PlanOf(ctx, randomSubject(t))
	require.Error(t, err, "a subject never read has nothing to serve")
	stats := c.Stats()
	assert.Equal(t, uint64(2), stats.Stale)
	assert.Equal(t, uint64(1), stats.Errors)
	assert.Equal(t, uint64(4), stats.Misses)
}

// TestColdCacheUnreachable: with nothing read yet and no server, PlanOf
// fails (the port then answers Unavailable) and counts an error.
func TestColdCacheUnreachable(t *testing.T) {
	c := newCache(t, rateplan.CacheOptions{Client: clientAt(t, deadAddr(t)), Keys: redistest.RandomKeys(t)}, false)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	plan, err := c.PlanOf(ctx, randomSubject(t))
	require.Error(t, err)
	require.Equal(t, ratelimit.PlanID(""), plan)
	stats := c.Stats()
	require.Equal(t, uint64(1), stats.Errors)
	require.Equal(t, uint64(0), stats.Stale)
	require.Zero(t, stats.Entries)
}

// afterHGET runs fn after each HGET of key the client sends returns,
// while armed: a change then crosses the read (sent before the change,
// recorded after it).
type afterHGET struct {
	key   string
	armed atomic.Bool
	fn    func()
}

func (h *afterHGET) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *afterHGET) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if args := cmd.Args(); cmd.Name() == "hget" && len(args) > 1 && args[1] == h.key && h.armed.CompareAndSwap(true, false) {
			h.fn()
		}
		return err
	}
}

func (h *afterHGET) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestCacheKeepsAnInvalidationThatCrossesARead: a read sent before a
// change whose invalidation arrives before the read is recorded answers
// what it read, but is not recorded: the next lookup reads the new plan
// instead of serving the old one for the TTL (Cache.gen).
func TestCacheKeepsAnInvalidationThatCrossesARead(t *testing.T) {
	srv := redistest.Start(t)
	keys := redistest.RandomKeys(t)
	store := newStore(t, srv, keys)
	ctx := redistest.AdminCtx(t)
	s := randomSubject(t)
	key, err := rateplan.Key(keys, s)
	require.NoError(t, err)

	clk := ratelimittest.NewClock(t0)
	cc := clientAt(t, srv.Addr())
	var c *rateplan.Cache
	hook := &afterHGET{key: key}
	hook.fn = func() {
		gen := rateplan.CacheGen(c)
		_, err := store.Set(ctx, s, planGold)
		require.NoError(t, err)
		require.Eventually(t, func() bool { return rateplan.CacheGen(c) != gen }, 5*time.Second, time.Millisecond,
			"the cache never heard the change")
	}
	cc.AddHook(hook)
	c = newCache(t, rateplan.CacheOptions{Client: cc, Keys: keys, TTL: time.Minute, Now: clk.Now}, true)
	waitSubscribers(t, srv, 1)

	plan, err := c.PlanOf(ctx, s)
	require.NoError(t, err)
	require.Equal(t, ratelimit.PlanID(""), plan)
	clk.Advance(2 * time.Minute) // expired: the next lookup reads, and the change crosses it
	hook.armed.Store(true)
	plan, err = c.PlanOf(ctx, s)
	require.NoError(t, err)
	require.False(t, hook.armed.Load(), "the read did not cross the change")
	require.Equal(t, ratelimit.PlanID(""), plan, "the crossed read answers what it read")

	misses := c.Stats().Misses
	plan, err = c.PlanOf(ctx, s)
	require.NoError(t, err)
	require.Equal(t, planGold, plan, "the crossed read was recorded: the change is lost for the TTL")
	require.Equal(t, misses+1, c.Stats().Misses)
}
