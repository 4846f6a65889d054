package redisrate

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
func breakerSignal(s sent) error {
	switch r := s.(type) {
	case replied:
		return nil
	case mayHaveRun:
		switch certainty.Classify(r.cause, true).Category {
		case ratelimit.CategoryTimeout, ratelimit.CategoryConnectionLost:
			return errBreakerFailure
		}
	case notSent:
		if r.reason != reasonPreSend {
			return errBreakerExcluded
		}
		if errors.Is(r.cause, ErrServerVersion) || errors.Is(r.cause, ErrScriptDigest) || isServerPolicyRefusal(r.cause) {
			return nil
		}
		switch certainty.Classify(r.cause, false).Category {
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
func (x *executor) breakerOf(t *target) *breaker {
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
		t.breaker.Store(newBreaker(x.breakerOpts, probe, x.breakerChanged))
	})
	return t.breaker.Load()
}

// breakerChanged tells the registered functions a target's change.
func (x *executor) breakerChanged(s BreakerState) {
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
// server, or the primaries of the slot map), in target order; empty
// without breakers.
func (p *Provider) BreakerTargets() []TargetBreaker {
	if p.exec.breakerOpts.Threshold == 0 {
		return nil
	}
	var out []TargetBreaker
	for _, t := range p.exec.route.targets() {
		out = append(out, TargetBreaker{Target: strconv.Itoa(t.index), Slots: p.exec.route.slotsOf(t), State: p.exec.breakerOf(t).state()})
	}
	return out
}

// BreakerState reports the provider's circuit breaker state: the worst
// over the targets serving now (open, then half_open, then closed), so a
// standalone or Sentinel endpoint reports its one breaker;
// BreakerDisabled without breakers.
func (p *Provider) BreakerState() BreakerState {
	if p.exec.breakerOpts.Threshold == 0 {
		return BreakerDisabled
	}
	worst := BreakerClosed
	for _, t := range p.exec.route.targets() {
		switch p.exec.breakerOf(t).state() {
		case BreakerOpen:
			return BreakerOpen
		case BreakerHalfOpen:
			worst = BreakerHalfOpen
		case BreakerClosed, BreakerDisabled:
		}
	}
	return worst
}

// BreakerTrips reports how many times a target's breaker has opened since
// New, summed over every target met.
func (p *Provider) BreakerTrips() uint64 {
	var n uint64
	for _, t := range p.exec.route.met() {
		if b := t.breaker.Load(); b != nil {
			n += b.trips.Load()
		}
	}
	return n
}

// OnBreakerChange registers f (in addition to any registered before) to be
// told every change of a target's breaker (open, closed); call it before
// serving. It is called synchronously on the goroutine that changed the
// state and must not block or call the provider.
func (p *Provider) OnBreakerChange(f func(BreakerState)) {
	p.exec.onBreakerChange = append(p.exec.onBreakerChange, f)
}

// shutdownBreakers stops every target's prober and waits for them.
func (x *executor) shutdownBreakers() {
	for _, t := range x.route.met() {
		t.breaker.Load().shutdown()
	}
}
