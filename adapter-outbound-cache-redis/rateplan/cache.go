package rateplan

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/internal/invalidation"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/ratedenial"
	"github.com/tech-log/tech-log-backend/shared-contract/keyspace"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// Defaults and bounds of CacheOptions.
const (
	DefaultMaxEntries = 100_000
	MaxEntries        = 10_000_000
	// DefaultTTL bounds how long an entry is served without a change
	// heard: a change is normally heard at once (the invalidation), and
	// an instance that missed it denies meanwhile (Store.Set empties the
	// old policy's state), so the TTL bounds an under-admission, never an
	// over-admission.
	DefaultTTL = 10 * time.Second
	MaxTTL     = time.Hour
)

// CacheOptions configures a Cache.
type CacheOptions struct {
	// Client reads assignments and carries the invalidations; required.
	Client redis.UniversalClient
	// Keys names the assignment keys; required.
	Keys *keyspace.Builder
	// MaxEntries bounds the table, 1..MaxEntries; 0 means
	// DefaultMaxEntries.
	MaxEntries int
	// TTL is how long an entry is served, 1ms..MaxTTL; 0 means
	// DefaultTTL.
	TTL time.Duration
	// Heartbeat spaces the subscription's heartbeats (as the denial
	// cache's, ratedenial.Options.Heartbeat); 0 means
	// ratedenial.DefaultHeartbeat.
	Heartbeat time.Duration
	// Log, optional, gets one line per change of the subscription.
	Log *slog.Logger
	// Now is the local clock (optional; time.Now).
	Now func() time.Time
	// Observe, optional, is told each lookup's result and each entry an
	// invalidation dropped; it must be safe for concurrent use and fast.
	Observe func(CacheEvent)
}

// CacheEvent is what a lookup or an invalidation did (a metric label).
type CacheEvent string

// The cache events.
const (
	// CacheHit: a fresh entry answered.
	CacheHit CacheEvent = "hit"
	// CacheMiss: the assignment was read from the server.
	CacheMiss CacheEvent = "miss"
	// CacheStale: the read failed and an expired entry answered.
	CacheStale CacheEvent = "stale"
	// CacheError: the read failed and no entry could answer.
	CacheError CacheEvent = "error"
	// CacheInvalidated: a published change dropped an entry.
	CacheInvalidated CacheEvent = "invalidated"
)

// Cache is the per-instance table of assignments, a
// ratelimit.PlanSource: an entry is served for TTL after it was read; a
// change published on the invalidation channel (Store.Set) drops it at
// once, and a change of the subscription expires every entry. When the
// server cannot be read, an expired entry is served (stale if error: on
// the server a stale plan denies, never over-admits, see Store.Set); with
// none, PlanOf fails.
type Cache struct {
	client redis.UniversalClient
	keys   *keyspace.Builder
	max    int
	ttl    time.Duration
	now    func() time.Time
	sub    *invalidation.Subscription
	notify func(CacheEvent)

	// gen changes with every invalidation and every change of the
	// subscription: a read is recorded only if gen is what it was before
	// the read was sent, so no change that crossed it is lost.
	gen           atomic.Uint64
	hits          atomic.Uint64
	misses        atomic.Uint64
	stale         atomic.Uint64
	errs          atomic.Uint64
	invalidations atomic.Uint64

	mu    sync.Mutex
	table map[ratelimit.SubjectDigest]*planEntry
	byKey map[string]ratelimit.SubjectDigest
}

type planEntry struct {
	plan ratelimit.PlanID
	key  string
	read time.Time
}

// NewCache returns a cache; Start starts its subscription.
func NewCache(opts CacheOptions) (*Cache, error) {
	var errs []error
	if opts.Client == nil {
		errs = append(errs, errors.New("CacheOptions.Client: nil"))
	}
	if opts.Keys == nil {
		errs = append(errs, errors.New("CacheOptions.Keys: nil"))
	}
	if opts.MaxEntries == 0 {
		opts.MaxEntries = DefaultMaxEntries
	}
	if opts.MaxEntries < 1 || opts.MaxEntries > MaxEntries {
		errs = append(errs, fmt.Errorf("CacheOptions.MaxEntries %d must be in 1..%d", opts.MaxEntries, MaxEntries))
	}
	if opts.TTL == 0 {
		opts.TTL = DefaultTTL
	}
	if opts.TTL < time.Millisecond || opts.TTL > MaxTTL {
		errs = append(errs, fmt.Errorf("CacheOptions.TTL %v must be in 1ms..%v", opts.TTL, MaxTTL))
	}
	if opts.Heartbeat == 0 {
		opts.Heartbeat = ratedenial.DefaultHeartbeat
	}
	if opts.Heartbeat < 10*time.Millisecond || opts.Heartbeat > time.Minute {
		errs = append(errs, fmt.Errorf("CacheOptions.Heartbeat %v must be in 10ms..1m", opts.Heartbeat))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("rateplan: invalid cache options: %w", err)
	}
	c := &Cache{
		client: opts.Client, keys: opts.Keys, max: opts.MaxEntries, ttl: opts.TTL, now: opts.Now, notify: opts.Observe,
		table: map[ratelimit.SubjectDigest]*planEntry{}, byKey: map[string]ratelimit.SubjectDigest{},
	}
	if c.now == nil {
		c.now = time.Now
	}
	c.sub = invalidation.New(opts.Client, ratedenial.Channel, opts.Heartbeat, "plan cache", opts.Log, listener{c})
	return c, nil
}

var _ ratelimit.PlanSource = (*Cache)(nil)

// PlanOf returns subject's plan ("" for none): from the table while its
// entry is fresh, else read from the server (and recorded), else an
// expired entry, else the read's error.
func (c *Cache) PlanOf(ctx context.Context, subject ratelimit.SubjectDigest) (ratelimit.PlanID, error) {
	now := c.now()
	c.mu.Lock()
	e := c.table[subject]
	c.mu.Unlock()
	if e != nil && now.Sub(e.read) < c.ttl {
		c.event(&c.hits, CacheHit)
		return e.plan, nil
	}
	c.event(&c.misses, CacheMiss)
	key, err := Key(c.keys, subject)
	if err != nil {
		c.event(&c.errs, CacheError)
		return "", fmt.Errorf("rateplan: assignment key: %w", err)
	}
	g := c.gen.Load()
	plan, err := c.client.HGet(ctx, key, FieldPlan).Result()
	switch {
	case errors.Is(err, redis.Nil):
		plan = ""
	case err != nil:
		if e != nil {
			c.event(&c.stale, CacheStale)
			return e.plan, nil
		}
		c.event(&c.errs, CacheError)
		return "", fmt.Errorf("rateplan: HGET assignment: %w", err)
	}
	c.record(subject, key, ratelimit.PlanID(plan), now, g)
	return ratelimit.PlanID(plan), nil
}

// record adds an entry read when gen was g, unless gen moved since.
func (c *Cache) record(subject ratelimit.SubjectDigest, key string, plan ratelimit.PlanID, read time.Time, g uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen.Load() != g {
		return
	}
	if _, ok := c.table[subject]; !ok && len(c.table) >= c.max {
		for s, e := range c.table { // one arbitrary entry makes room
			delete(c.byKey, e.key)
			delete(c.table, s)
			break
		}
	}
	c.table[subject] = &planEntry{plan: plan, key: key, read: read}
	c.byKey[key] = subject
}

// Invalidate drops the entry whose assignment key is key; it reports
// whether there was one.
func (c *Cache) Invalidate(key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen.Add(1)
	s, ok := c.byKey[key]
	if ok {
		delete(c.byKey, key)
		delete(c.table, s)
		c.event(&c.invalidations, CacheInvalidated)
	}
	return ok
}

// event counts ev in n and tells the observer.
func (c *Cache) event(n *atomic.Uint64, ev CacheEvent) {
	n.Add(1)
	if c.notify != nil {
		c.notify(ev)
	}
}

// expireAll marks every entry expired: each is read again at its next
// lookup, and answers only when that read fails (stale if error).
func (c *Cache) expireAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen.Add(1)
	for _, e := range c.table {
		e.read = time.Time{}
	}
}

type listener struct{ c *Cache }

func (l listener) Invalidate(key string) { l.c.Invalidate(key) }

// SetLive: every change of the subscription expires the table (a change
// may have been missed), but keeps it: while the server cannot be read
// (the subscription is usually lost then too) the entries still answer,
// so a plan-mapped local-fallback policy keeps deciding locally.
func (l listener) SetLive(bool) { l.c.expireAll() }

// Start starts the invalidation subscription (it retries by itself). The
// ctx argument is unused, for an fx hook.
func (c *Cache) Start(context.Context) error {
	c.sub.Start()
	return nil
}

// Close stops the subscription and clears the table.
func (c *Cache) Close() { c.sub.Close() }

// CacheStats is what the cache reports for metrics.
type CacheStats struct {
	// Hits are lookups answered by a fresh entry, Misses the ones read
	// from the server, Stale the ones answered by an expired entry because
	// the read failed, Errors the ones that failed.
	Hits, Misses, Stale, Errors uint64
	// Invalidations are entries dropped by a published change.
	Invalidations uint64
	// Entries is the table's size.
	Entries int
}

// Stats returns the counters and the table's size.
func (c *Cache) Stats() CacheStats {
	c.mu.Lock()
	n := len(c.table)
	c.mu.Unlock()
	return CacheStats{
		Hits: c.hits.Load(), Misses: c.misses.Load(), Stale: c.stale.Load(), Errors: c.errs.Load(),
		Invalidations: c.invalidations.Load(), Entries: n,
	}
}
