package ratedenial

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/internal/invalidation"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redisrate"
	"github.com/tech-log/tech-log-backend/shared-contract/keyspace"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// Cache is the local denial cache, a ratelimit.EdgePort over another
// port (see the package doc). It is safe for concurrent use; Close stops
// its subscription.
type Cache struct {
	inner    ratelimit.EdgePort
	keys     *keyspace.Builder
	policies map[ratelimit.PolicyID]*policyConf
	max      int
	now      func() time.Time
	log      *slog.Logger

	// n is len(table), read without the lock: an empty table costs an
	// admitted request no lock.
	n atomic.Int64
	// gen changes (under mu) with every invalidation and every change of
	// the subscription: a denial is recorded only if gen is what it was
	// before the call was sent, so no reset that crossed the call is
	// lost.
	gen      atomic.Uint64
	hits     atomic.Uint64
	received atomic.Uint64
	evicted  atomic.Uint64

	mu        sync.RWMutex
	table     map[key]*entry
	byState   map[string]key // state key -> table key, for invalidations
	lastSweep time.Time
	// live: the cache may serve and record (always without a client;
	// with one, only while subscribed).
	live bool

	// sub is the invalidation subscription; nil without a client.
	sub *invalidation.Subscription
}

var _ ratelimit.EdgePort = (*Cache)(nil)

// policyConf is one policy of the decorated port.
type policyConf struct {
	policy ratelimit.Policy
	// on: the policy's algorithm is Exact and the policy did not opt out.
	on bool
}

// key names an entry: the policy, its revision and the subject.
type key struct {
	id       ratelimit.PolicyID
	revision int64
	subject  ratelimit.SubjectDigest
}

// entry is one cached denial.
type entry struct {
	cost     int64     // the denied cost: a cost at least this is denied
	sent     time.Time // the local clock before the call was sent (t0)
	expires  time.Time // sent + the decision's RetryAfter - 1ms
	decision ratelimit.Decision
	stateKey string
}

// Evaluate implements ratelimit.EdgePort: a cached denial when one
// applies (Source and Certainty as the server gave them, Remaining as the
// server last gave it, RetryAfter the time left to the entry's expiry,
// ServerNow advanced by the local time since the call was sent, ResetAt
// the server's), otherwise the decorated port's outcome, whose denial is
// then recorded. It never panics and never returns nil.
func (c *Cache) Evaluate(ctx context.Context, req ratelimit.Request) (out ratelimit.Outcome) {
	defer ratelimit.Recover(&out, req.PolicyID, "ratedenial")
	pc := c.policies[req.PolicyID]
	if pc == nil || !pc.on || ctx == nil {
		return c.inner.Evaluate(ctx, req) // its precheck answers the bad request
	}
	// A global policy's denial is every subject's (ADR 0027).
	req = req.ScopedTo(pc.policy)
	t0 := c.now()
	if c.n.Load() > 0 && req.EvaluationID == "" {
		if out, ok := c.serve(ctx, pc, req, t0); ok {
			return out
		}
	}
	g := c.gen.Load()
	out = c.inner.Evaluate(ctx, req)
	if ev, ok := out.(ratelimit.Evaluated); ok && !ev.Decision.Allowed {
		c.record(pc, req, ev.Decision, t0, g)
	}
	return out
}

// serve answers req from its entry when one applies at now: a live cache,
// an entry of the policy's revision not yet expired, a cost at least the
// entry's and a request the decorated port would have evaluated (cost
// within MaxCost, deadline set and not passed, ctx not done).
func (c *Cache) serve(ctx context.Context, pc *policyConf, req ratelimit.Request, now time.Time) (ratelimit.Outcome, bool) {
	if req.Cost > pc.policy.MaxCost() || req.Deadline.IsZero() || ctx.Err() != nil || !now.Before(req.EffectiveDeadline(ctx)) {
		return nil, false
	}
	k := key{id: req.PolicyID, revision: pc.policy.Revision(), subject: req.SubjectDigest}
	// A read lock: the hits of a flood do not queue behind each other.
	// An entry is never changed once in the table (a new denial replaces
	// it), and an expired one is left to the next sweep or replacement.
	c.mu.RLock()
	e := c.table[k]
	live := c.live
	c.mu.RUnlock()
	if e == nil || !live || !now.Before(e.expires) || req.Cost < e.cost {
		return nil, false
	}
	d, sent, expires := e.decision, e.sent, e.expires
	d.RetryAfter = expires.Sub(now)
	if !d.ServerNow.IsZero() {
		d.ServerNow = d.ServerNow.Add(now.Sub(sent))
	}
	c.hits.Add(1)
	return ratelimit.Evaluated{Decision: d}, true
}

// record keeps the server's denial d of req, sent at t0 when the
// generation was g: only a global decision of the policy's revision with
// a retry-after, and only if no invalidation or change of the
// subscription happened since t0.
func (c *Cache) record(pc *policyConf, req ratelimit.Request, d ratelimit.Decision, t0 time.Time, g uint64) {
	if d.Source != ratelimit.GlobalRedis || d.Replayed || d.RetryAfter <= 0 ||
		d.PolicyID != req.PolicyID || d.PolicyRevision != pc.policy.Revision() {
		return
	}
	// The program reads the server's clock in whole milliseconds (floor):
	// the instant it allows again, eff + R, may lie up to 1 ms less than
	// R after the real instant it read its clock at. One millisecond
	// less keeps the entry's expiry before it (two for GCRA: margin).
	expires := t0.Add(d.RetryAfter - margin(pc.policy.Algorithm()))
	now := c.now()
	if !now.Before(expires) {
		return
	}
	stateKey, err := redisrate.StateKey(c.keys, pc.policy, req.SubjectDigest)
	if err != nil {
		return
	}
	k := key{id: req.PolicyID, revision: pc.policy.Revision(), subject: req.SubjectDigest}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.live || c.gen.Load() != g {
		return
	}
	if old := c.table[k]; old != nil {
		delete(c.byState, old.stateKey)
	} else {
		c.makeRoom(now)
		c.n.Add(1)
	}
	c.table[k] = &entry{cost: req.Cost, sent: t0, expires: expires, decision: d, stateKey: stateKey}
	c.byState[stateKey] = k
}

// sweepEvery spaces the sweeps of expired entries a full table makes.
const sweepEvery = time.Second

// makeRoom drops the expired entries (at most once per sweepEvery, when
// a denial is recorded), then, if the table is still full, one arbitrary
// entry (the first of a map range: no order to keep up on every hit).
// Called with c.mu held.
func (c *Cache) makeRoom(now time.Time) {
	if now.Sub(c.lastSweep) >= sweepEvery {
		c.lastSweep = now
		for k, e := range c.table {
			if !now.Before(e.expires) {
				c.remove(k, e)
			}
		}
	}
	if len(c.table) < c.max {
		return
	}
	for k, e := range c.table {
		if len(c.table) < c.max {
			return
		}
		c.remove(k, e)
		c.evicted.Add(1)
	}
}

// remove deletes k's entry e. Called with c.mu held.
func (c *Cache) remove(k key, e *entry) {
	delete(c.table, k)
	delete(c.byState, e.stateKey)
	c.n.Add(-1)
}

// Invalidate drops the entry of the state stateKey names (a reset of that
// state) and keeps any denial in flight from being recorded; it reports
// whether an entry was dropped.
func (c *Cache) Invalidate(stateKey string) bool {
	c.received.Add(1)
	return c.drop(stateKey)
}

// drop removes stateKey's entry, if any, and moves the generation on (a
// denial recorded from a call sent before is not kept).
func (c *Cache) drop(stateKey string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen.Add(1)
	k, ok := c.byState[stateKey]
	if ok {
		c.remove(k, c.table[k])
	}
	return ok
}

// setLive changes whether the cache serves and records; every change
// clears the table.
func (c *Cache) setLive(live bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen.Add(1)
	c.live = live
	clear(c.table)
	clear(c.byState)
	c.n.Store(0)
}

// Stats is what the cache reports for metrics.
type Stats struct {
	// Hits counts requests answered from the cache.
	Hits uint64
	// Entries is the table's size, MaxEntries its bound.
	Entries, MaxEntries int
	// Invalidations counts invalidations received (Invalidate calls,
	// one per message on Channel).
	Invalidations uint64
	// Evicted counts live entries dropped to make room.
	Evicted uint64
	// Live: the cache serves (subscribed, or no subscription needed).
	Live bool
}

// Stats returns the counters and the table's use.
func (c *Cache) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Stats{Hits: c.hits.Load(), Entries: len(c.table), MaxEntries: c.max,
		Invalidations: c.received.Load(), Evicted: c.evicted.Load(), Live: c.live}
}

// margin is how much earlier than t0 + RetryAfter an entry expires: 1 ms
// for the algorithms that decide on the server's millisecond. One that
// decides on the microsecond (AlgorithmSpec.DecidesInMicros: GCRA and the
// leaky bucket that runs on it, ADR 0021) admits from an instant A with
// ceil(A/1000 µs) = eff + R, so A > eff + R - 1 ms, and eff >= the real
// instant sigma - 1 ms >= t0 - 1 ms: A > t0 + R - 2 ms.
func margin(a ratelimit.Algorithm) time.Duration {
	if s, ok := a.Spec(); ok && s.DecidesInMicros {
		return 2 * time.Millisecond
	}
	return time.Millisecond
}
