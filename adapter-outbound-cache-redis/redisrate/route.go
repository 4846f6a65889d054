package redisrate

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/internal/certainty"
)

// target is one primary endpoint a program call is sent to: its client,
// its batcher, and whether it passed qualification (version check, script
// warm-up, server-policy checks) since the route met it. A standalone or
// Sentinel endpoint is one target; a cluster has one per primary.
type target struct {
	// addr is the primary's address in a cluster, "" for a fixed target
	// (never in a metric label or an outcome).
	addr string
	// index numbers the targets in the order the route met them (0 for a
	// fixed target): the target's name in metrics and readiness.
	index  int
	client commander
	// mu serializes qualification.
	mu        sync.Mutex
	qualified atomic.Bool
	// batch batches first attempts to this target when batching is on.
	batchOnce sync.Once
	batch     atomic.Pointer[batcher]
	// breaker is the target's circuit breaker (breakers.go), created on
	// first use when breakers are on.
	breakerOnce sync.Once
	breaker     atomic.Pointer[breaker]
}

func newTarget(index int, addr string, client commander) *target {
	return &target{index: index, addr: addr, client: client}
}

// route is how the send loop finds targets and which refusals it follows:
// fixedRoute (standalone, Sentinel) or clusterRouter (Redis Cluster).
type route interface {
	// targetFor returns the target serving key.
	targetFor(ctx context.Context, key string) (*target, error)
	// ensure qualifies t before its first program call, if the route
	// qualifies targets on first use.
	ensure(ctx context.Context, t *target) error
	// follows reports whether the loop may follow r on this route.
	follows(r certainty.Refusal) bool
	// moved records that key's slot lives at addr and returns its target.
	moved(key, addr string) (*target, error)
	// target returns the target at addr (an ASK redirect).
	target(addr string) (*target, error)
	// reload reloads the route's map and returns key's target again.
	reload(ctx context.Context, key string) (*target, error)
	// lost is told a call that ended without a reply (not sent, or may
	// have run): the route's map may be old.
	lost(res sent)
	// targets returns the targets serving now.
	targets() []*target
	// met returns every target the route has met.
	met() []*target
	// slotsOf is t's hash-slot ranges ("" for a fixed target).
	slotsOf(t *target) string
}

// fixedRoute is one target: a standalone server, or the primary a
// Sentinel-managed client follows. It follows NOSCRIPT only; Start
// qualifies its target.
type fixedRoute struct{ t *target }

func (r *fixedRoute) targetFor(context.Context, string) (*target, error) { return r.t, nil }
func (r *fixedRoute) ensure(context.Context, *target) error              { return nil }
func (r *fixedRoute) follows(f certainty.Refusal) bool                   { return f == certainty.RefusalNoScript }
func (r *fixedRoute) moved(string, string) (*target, error)              { return r.t, nil }
func (r *fixedRoute) target(string) (*target, error)                     { return r.t, nil }
func (r *fixedRoute) reload(context.Context, string) (*target, error)    { return r.t, nil }
func (r *fixedRoute) lost(sent)                                          {}
func (r *fixedRoute) targets() []*target                                 { return []*target{r.t} }
func (r *fixedRoute) met() []*target                                     { return []*target{r.t} }
func (r *fixedRoute) slotsOf(*target) string                             { return "" }
