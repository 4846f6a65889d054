package send

import (
	"context"
	"errors"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/internal/certainty"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// breakerSignal maps what one send reported to what its target's breaker
// records: a failure for a connection failure or a timeout, success for
// anything the server answered (a reply, an error reply, a refusal at
// qualification), and nothing (excluded) for the rest (the caller's
// deadline or cancellation, the pool, a closed client).
func breakerSignal(s Sent) error {
	switch r := s.(type) {
	case Replied:
		return nil
	case MayHaveRun:
		switch certainty.Classify(r.Cause, true).Category {
		case ratelimit.CategoryTimeout, ratelimit.CategoryConnectionLost:
			return errBreakerFailure
		}
	case NotSent:
		if r.Reason != ReasonPreSend {
			return errBreakerExcluded
		}
		if errors.Is(r.Cause, ErrQualificationRefused) {
			return nil // the server answered; it is refused for what it said
		}
		switch certainty.Classify(r.Cause, false).Category {
		case ratelimit.CategoryConnection:
			return errBreakerFailure
		case ratelimit.CategoryServerRejected:
			return nil
		}
	}
	return errBreakerExcluded
}

// breakerOf returns t's circuit breaker, creating it on first use; nil
// when breakers are off. Its prober PINGs t's client.
func (x *Executor) breakerOf(t *Target) *breaker {
	if x.breakerOpts.Threshold == 0 {
		return nil
	}
	if b := t.breaker.Load(); b != nil {
		return b
	}
	t.breakerOnce.Do(func() {
		probe := func(ctx context.Context) error {
			ctx, cancel := context.WithTimeout(ctx, x.timeout)
			defer cancel()
			ping := redis.NewStatusCmd(ctx, "ping")
			_ = t.client.Process(ctx, ping)
			return ping.Err()
		}
		b := newBreaker(x.breakerOpts, probe, x.breakerChanged)
		t.breaker.Store(b)
		if x.breakersShut.Load() {
			b.shutdown() // met after ShutdownBreakers: it never starts a prober
		}
	})
	return t.breaker.Load()
}

// breakerChanged tells the registered functions a target's change.
func (x *Executor) breakerChanged(s BreakerState) {
	for _, f := range x.onBreakerChange {
		f(s)
	}
}

// TargetBreaker is the circuit breaker of one target: the server, or one
// cluster primary.
type TargetBreaker struct {
	// Target names the target without its address: "0" for a standalone
	// or Sentinel endpoint, the primary's index (in the order the
	// provider met it) in a cluster. Stable for the provider's life.
	Target string
	// Slots is the primary's hash-slot ranges ("0-5460"), "" for a
	// standalone or Sentinel endpoint.
	Slots string
	State BreakerState
}

// BreakerTargets reports the breaker of every target serving now (the
// server, or the primaries of the slot map), in target order; nil without
// breakers.
func (x *Executor) BreakerTargets() []TargetBreaker {
	if x.breakerOpts.Threshold == 0 {
		return nil
	}
	var out []TargetBreaker
	for _, t := range x.route.targets() {
		out = append(out, TargetBreaker{Target: strconv.Itoa(t.index), Slots: x.route.slotsOf(t), State: x.breakerOf(t).state()})
	}
	return out
}

// BreakerState is the worst breaker state over the targets serving now
// (open, then half_open, then closed); BreakerDisabled without breakers.
func (x *Executor) BreakerState() BreakerState {
	if x.breakerOpts.Threshold == 0 {
		return BreakerDisabled
	}
	worst := BreakerClosed
	for _, t := range x.route.targets() {
		switch x.breakerOf(t).state() {
		case BreakerOpen:
			return BreakerOpen
		case BreakerHalfOpen:
			worst = BreakerHalfOpen
		case BreakerClosed, BreakerDisabled:
		}
	}
	return worst
}

// BreakerTrips is how many times a target's breaker has opened, summed
// over every target met.
func (x *Executor) BreakerTrips() uint64 {
	var n uint64
	for _, t := range x.route.met() {
		if b := t.breaker.Load(); b != nil {
			n += b.trips.Load()
		}
	}
	return n
}

// OnBreakerChange registers f to be told every change of a target's
// breaker (open, closed); call it before the first call. It is called
// synchronously and must not block.
func (x *Executor) OnBreakerChange(f func(BreakerState)) {
	x.onBreakerChange = append(x.onBreakerChange, f)
}

// ShutdownBreakers stops every target's prober and waits for them.
func (x *Executor) ShutdownBreakers() {
	x.breakersShut.Store(true)
	for _, t := range x.route.met() {
		t.breaker.Load().shutdown()
	}
}
