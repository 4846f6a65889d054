package send

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/internal/certainty"
)

// Target is one primary endpoint a program call is sent to: its client,
// its batcher, and whether it passed qualification (version check, script
// warm-up, server-policy checks) since the route met it. A standalone or
// Sentinel endpoint is one target; a cluster has one per primary.
type Target struct {
	// addr is the primary's address in a cluster, "" for a fixed target
	// (never in a metric label or an outcome).
	addr string
	// index numbers the targets in the order the route met them (0 for a
	// fixed target): the target's name in metrics and readiness.
	index  int
	client Commander
	// mu serializes qualification.
	mu        sync.Mutex
	qualified atomic.Bool
	// batch batches first attempts to this target when batching is on.
	batchOnce sync.Once
	batch     atomic.Pointer[batcher]
	// inFlight holds one token per program call on the wire to this
	// target (takeInFlight), created on first use when the bound is on.
	inFlightOnce sync.Once
	inFlight     atomic.Pointer[chan struct{}]
	// breaker is the target's circuit breaker (breakers.go), created on
	// first use when breakers are on.
	breakerOnce sync.Once
	breaker     atomic.Pointer[breaker]
}

func newTarget(index int, addr string, client Commander) *Target {
	return &Target{index: index, addr: addr, client: client}
}

// route is how the send loop finds targets and which refusals it follows:
// fixedRoute (standalone, Sentinel) or ClusterRouter (Redis Cluster).
type route interface {
	// targetFor returns the target serving key.
	targetFor(ctx context.Context, key string) (*Target, error)
	// Ensure qualifies t before its first program call, if the route
	// qualifies targets on first use.
	Ensure(ctx context.Context, t *Target) error
	// follows reports whether the loop may follow r on this route.
	follows(r certainty.Refusal) bool
	// moved records that key's slot lives at addr and returns its target.
	moved(key, addr string) (*Target, error)
	// Target returns the target at addr (an ASK redirect).
	target(addr string) (*Target, error)
	// reload reloads the route's map and returns key's target again.
	reload(ctx context.Context, key string) (*Target, error)
	// lost is told a call that ended without a reply (not sent, or may
	// have run): the route's map may be old.
	lost(res Sent)
	// targets returns the targets serving now.
	targets() []*Target
	// met returns every target the route has met.
	met() []*Target
	// slotsOf is t's hash-slot ranges ("" for a fixed target).
	slotsOf(t *Target) string
}

// fixedRoute is one target: a standalone server, or the primary a
// Sentinel-managed client follows. It follows NOSCRIPT only; Start
// qualifies its target.
type fixedRoute struct{ t *Target }

func (r *fixedRoute) targetFor(context.Context, string) (*Target, error) { return r.t, nil }
func (r *fixedRoute) Ensure(context.Context, *Target) error              { return nil }
func (r *fixedRoute) follows(f certainty.Refusal) bool                   { return f == certainty.RefusalNoScript }
func (r *fixedRoute) moved(string, string) (*Target, error)              { return r.t, nil }
func (r *fixedRoute) target(string) (*Target, error)                     { return r.t, nil }
func (r *fixedRoute) reload(context.Context, string) (*Target, error)    { return r.t, nil }
func (r *fixedRoute) lost(Sent)                                          {}
func (r *fixedRoute) targets() []*Target                                 { return []*Target{r.t} }
func (r *fixedRoute) met() []*Target                                     { return []*Target{r.t} }
func (r *fixedRoute) slotsOf(*Target) string                             { return "" }

// Addr is the target's address ("" for a fixed target); for errors and
// logs, never a metric label.
func (t *Target) Addr() string { return t.addr }

// Client is the target's client.
func (t *Target) Client() Commander { return t.client }

// The in-flight bound belongs to a target, like its breaker and its
// batcher: a primary that hangs holds at most its own tokens for a command
// timeout each, and calls for other primaries' slots never wait for them
// (ADR 0023). A standalone or Sentinel endpoint is one target, so there it
// is the provider's one bound.

// SetMaxInFlight bounds the program calls on the wire to each target at n
// (n < 1: no bound). A call beyond it is answered
// NotSent{ReasonInFlight} at once, without waiting. Call it before the
// first Run.
func (x *Executor) SetMaxInFlight(n int) { x.maxInFlight = max(n, 0) }

// takeInFlight takes one of t's in-flight tokens without waiting and
// reports whether it got one (always true when there is no bound).
func (x *Executor) takeInFlight(t *Target) bool {
	sem := x.inFlightOf(t)
	if sem == nil {
		return true
	}
	select {
	case sem <- struct{}{}:
		return true
	default:
		return false
	}
}

// releaseInFlight gives back the token a call holds on t (nil: none).
func (x *Executor) releaseInFlight(t *Target) {
	if t == nil {
		return
	}
	if sem := x.inFlightOf(t); sem != nil {
		<-sem
	}
}

// inFlightOf returns t's token channel, creating it on first use; nil when
// there is no bound.
func (x *Executor) inFlightOf(t *Target) chan struct{} {
	if x.maxInFlight < 1 {
		return nil
	}
	if p := t.inFlight.Load(); p != nil {
		return *p
	}
	t.inFlightOnce.Do(func() {
		sem := make(chan struct{}, x.maxInFlight)
		t.inFlight.Store(&sem)
	})
	return *t.inFlight.Load()
}
