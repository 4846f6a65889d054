package send

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/internal/certainty"
)

// MaxClusterHops bounds the refusals one program call follows: MOVED, ASK,
// TRYAGAIN and CLUSTERDOWN replies (each sent before anything ran), and
// the NOSCRIPT that leads to the one EVAL.
const MaxClusterHops = 5

// clusterRetryPause is the pause before a program call is sent again after
// TRYAGAIN or CLUSTERDOWN.
const clusterRetryPause = 25 * time.Millisecond

// Run sends cl's program for cl.Key (and cl.DedupKey) through the send
// loop, with cl.Pre (if any) ahead of it on the first attempt.
func (x *Executor) Run(ctx context.Context, cl Call) Sent {
	c := x.calls.Get().(*call)
	defer x.release(c)
	c.key, c.dedupKey = cl.Key, cl.DedupKey
	c.cost, c.costArg = cl.Cost, cl.CostArg
	c.evalID, c.evalIDArg = cl.EvalID, cl.EvalIDArg
	c.pre = cl.Pre
	return x.loop(ctx, c, cl.Script, cl.Argv, cl.SendBy)
}

// RunSet sends cl's program over cl.Keys, the keys of one slot (a policy
// set's members, ADR 0027), with cl.Argv exactly as given (no cost is
// substituted) through the same send loop: Keys[0] picks the target, and
// every key must share its Redis Cluster slot (the caller's rule; the
// server refuses otherwise with CROSSSLOT, a reply: nothing ran).
func (x *Executor) RunSet(ctx context.Context, cl Call) Sent {
	if len(cl.Keys) == 0 {
		return NotSent{Reason: ReasonPreSend, Cause: errNoKeys, Command: CmdEvalSha}
	}
	c := x.calls.Get().(*call)
	defer x.release(c)
	c.key, c.keys = cl.Keys[0], cl.Keys
	return x.loop(ctx, c, cl.Script, cl.Argv, cl.SendBy)
}

// loop is the one send loop, for every topology (a standalone or Sentinel
// endpoint is a route with one fixed target). It picks the key's target,
// qualifies it if the route requires, sends the EVALSHA (batched when
// other calls wait for the target), and follows the refusals its route
// allows while sendBy has not passed and at most MaxClusterHops times:
// NOSCRIPT with exactly one EVAL of the source; MOVED, ASK (ASKING on the
// same connection), TRYAGAIN and CLUSTERDOWN in a cluster. Every refusal
// is a reply sent before anything ran; any other result ends the call, so
// a command that may have run is never sent again.
func (x *Executor) loop(ctx context.Context, c *call, s *Script, argv []any, sendBy time.Time) Sent {
	command, program, text := CmdEvalSha, s.sha, s.shaHex
	t, err := x.route.targetFor(ctx, c.key)
	if err != nil {
		return NotSent{Reason: ReasonPreSend, Cause: err, Command: command}
	}
	fellBack, asking := false, false
	var held *Target // the target whose in-flight token this call holds
	defer func() { x.releaseInFlight(held) }()
	for hop := 0; ; hop++ {
		if held != t {
			// A call holds one token, of the target it is sent to: a
			// redirect gives the old target's back first (a refusal: nothing
			// ran there). A target at its bound is not sent to.
			x.releaseInFlight(held)
			held = nil
			if !x.takeInFlight(t) {
				return NotSent{Reason: ReasonInFlight, Cause: ErrInFlightFull, Command: command}
			}
			held = t
		}
		record, admitted := x.breakerOf(t).admit()
		if !admitted {
			// The target's breaker is open: nothing is sent to it. In a
			// cluster the slot map is reloaded (a failover may have moved
			// the slot to a healthy primary).
			res := NotSent{Reason: ReasonBreakerOpen, Cause: ErrCircuitOpen, Command: command}
			x.route.lost(res)
			return res
		}
		res := x.attempt(ctx, t, c, hop, command, program, text, s, argv, sendBy, asking)
		record(res)
		rep, ok := res.(Replied)
		if !ok {
			x.route.lost(res)
			return res
		}
		if rep.Err == nil {
			return res
		}
		refusal, addr := certainty.Follow(rep.Err)
		if refusal == certainty.RefusalNoScript && fellBack {
			refusal = certainty.RefusalNone // NOSCRIPT after the EVAL: a fault
		}
		if refusal == certainty.RefusalNone || !x.route.follows(refusal) {
			return res
		}
		if x.now().After(sendBy) {
			if refusal == certainty.RefusalNoScript {
				// The server ran nothing; too little deadline is left.
				return NotSent{Reason: ReasonDeadline, Cause: fmt.Errorf("after NOSCRIPT: %w", ErrDeadlineTooShort), Command: CmdEval}
			}
			return res // a refusal: nothing ran
		}
		if hop+1 >= MaxClusterHops {
			return res
		}
		switch refusal {
		case certainty.RefusalNoScript:
			command, program, text, fellBack = CmdEval, s.source, s.name, true
		case certainty.RefusalMoved:
			if t, err = x.route.moved(c.key, addr); err != nil {
				return NotSent{Reason: ReasonPreSend, Cause: err, Command: command}
			}
			asking = false
		case certainty.RefusalAsk:
			if t, err = x.route.target(addr); err != nil {
				return NotSent{Reason: ReasonPreSend, Cause: err, Command: command}
			}
			asking = true
		case certainty.RefusalTryAgain, certainty.RefusalClusterDown:
			if !pause(ctx, clusterRetryPause) {
				return res
			}
			if refusal == certainty.RefusalClusterDown {
				if t, err = x.route.reload(ctx, c.key); err != nil {
					return res
				}
				asking = false
			}
		case certainty.RefusalNone: // returned above
		}
	}
}

// attempt qualifies t if its route requires it, then sends the call to it:
// batched on a first attempt when batching is on, alone otherwise (the EVAL
// and the redirects).
func (x *Executor) attempt(ctx context.Context, t *Target, c *call, hop int, command string, program []byte, text string, s *Script, argv []any, sendBy time.Time, asking bool) Sent {
	if err := x.route.Ensure(ctx, t); err != nil {
		return NotSent{Reason: ReasonPreSend, Cause: err, Command: command}
	}
	if b := x.batcherOf(t); hop == 0 && b != nil && c.pre == nil {
		return b.do(ctx, c, batchReq{s: s, argv: argv, sendBy: sendBy})
	}
	return x.send(ctx, t.client, c, command, program, text, argv, asking)
}

// pause waits d, or returns false when ctx is done first.
func pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

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
	// breaker is the target's circuit breaker (breaker.go), created on
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

// The in-flight bound belongs to a target, like its breaker and its
// batcher: a primary that hangs holds at most its own tokens for a command
// timeout each, and calls for other primaries' slots never wait for them
// (ADR 0023). A standalone or Sentinel endpoint is one target, so there it
// is the provider's one bound.

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
