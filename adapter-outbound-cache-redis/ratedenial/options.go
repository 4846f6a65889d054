package ratedenial

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/internal/invalidation"
	"github.com/tech-log/tech-log-backend/shared-contract/keyspace"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// Bounds and defaults of Options.
const (
	// DefaultMaxEntries is Options.MaxEntries when 0.
	DefaultMaxEntries = 10_000
	// MaxEntries bounds Options.MaxEntries: the contract's
	// ratelimit.MaxDenialCacheEntries, which the configuration checks.
	MaxEntries = ratelimit.MaxDenialCacheEntries
	// DefaultHeartbeat is Options.Heartbeat when 0.
	DefaultHeartbeat = time.Second
)

// Options configures a Cache.
type Options struct {
	// Policies are the decorated port's policies. Required (at least one).
	Policies []ratelimit.Policy
	// Disabled lists the policies whose denials are never cached (the
	// policy file's "denialCache": false). A policy whose algorithm is not
	// Exact is never cached either.
	Disabled []ratelimit.PolicyID
	// Keys derives the state key of an entry (redisrate.StateKey), the
	// name an invalidation carries. Required.
	Keys *keyspace.Builder
	// MaxEntries bounds the table, 1..MaxEntries; 0 means
	// DefaultMaxEntries. A full table drops its expired entries, then one
	// arbitrary live entry, to record a new denial.
	MaxEntries int
	// Client, when set, is the coordination client the cache subscribes
	// to Channel with (from Start on): it then serves and records only
	// while subscribed.
	// Nil: no subscription, the cache always serves (for embedding where
	// nothing resets state, and tests); Invalidate still works.
	Client redis.UniversalClient
	// Heartbeat spaces the heartbeats the cache publishes on Channel
	// through Client and must receive on its subscription: one not
	// received by the next is a lost subscription (noticed within two
	// heartbeats). 10ms..1m; 0 means DefaultHeartbeat.
	Heartbeat time.Duration
	// Log, optional, gets one line per change of the subscription (lost,
	// subscribed), never per message.
	Log *slog.Logger
	// Now is the local clock (optional; time.Now). It must carry a
	// monotonic reading, as time.Now does.
	Now func() time.Time
}

// ErrInvalidOptions wraps every error New returns.
var ErrInvalidOptions = errors.New("ratedenial: invalid options")

// Exact reports whether the denial cache is exact for algorithm a: with
// no other traffic and no reset, a request the server denied with
// retry-after R stays denied, for that cost and every larger one, at every
// instant before R has passed on the server's clock. This is the rule per
// algorithm (docs/programs.md, "Denial cache"), the contract's
// ratelimit.DenialCacheExact; an algorithm it does not list is never
// cached.
func Exact(a ratelimit.Algorithm) bool { return ratelimit.DenialCacheExact(a) }

// New returns the cache over inner; it starts nothing (see Start). It
// fails if opts are invalid.
func New(inner ratelimit.EdgePort, opts Options) (*Cache, error) {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidOptions}, args...)...))
	}
	if inner == nil {
		bad("inner port: nil")
	}
	if len(opts.Policies) == 0 {
		bad("Options.Policies: none given")
	}
	if opts.Keys == nil {
		bad("Options.Keys: nil")
	}
	if opts.MaxEntries == 0 {
		opts.MaxEntries = DefaultMaxEntries
	}
	if opts.MaxEntries < 1 || opts.MaxEntries > MaxEntries {
		bad("Options.MaxEntries %d must be in 1..%d", opts.MaxEntries, MaxEntries)
	}
	if opts.Heartbeat == 0 {
		opts.Heartbeat = DefaultHeartbeat
	}
	if opts.Heartbeat < 10*time.Millisecond || opts.Heartbeat > time.Minute {
		bad("Options.Heartbeat %v must be in 10ms..1m", opts.Heartbeat)
	}
	off := map[ratelimit.PolicyID]bool{}
	for _, id := range opts.Disabled {
		off[id] = true
	}
	c := &Cache{
		inner: inner, keys: opts.Keys, max: opts.MaxEntries, now: opts.Now,
		policies: map[ratelimit.PolicyID]*policyConf{},
		table:    map[key]*entry{}, byState: map[string]key{},
		live: opts.Client == nil, log: opts.Log,
	}
	if c.now == nil {
		c.now = time.Now
	}
	for i, p := range opts.Policies {
		if p.IsZero() {
			bad("Options.Policies[%d]: zero policy", i)
			continue
		}
		if _, dup := c.policies[p.ID()]; dup {
			bad("Options.Policies[%d]: policy %q given twice", i, p.ID())
			continue
		}
		c.policies[p.ID()] = &policyConf{policy: p, on: Exact(p.Algorithm()) && !off[p.ID()]}
	}
	for _, id := range opts.Disabled {
		if _, ok := c.policies[id]; !ok {
			bad("Options.Disabled: %q is not one of Options.Policies", id)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if opts.Client != nil {
		c.sub = invalidation.New(opts.Client, Channel, opts.Heartbeat, "denial cache", opts.Log, listener{c})
	}
	return c, nil
}
