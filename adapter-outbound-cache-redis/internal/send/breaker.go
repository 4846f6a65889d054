package send

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sony/gobreaker/v2"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/internal/certainty"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// Sentinel results the breaker records for a call (gobreaker's done takes
// an error).
var (
	errBreakerFailure  = errors.New("connection failure or timeout")
	errBreakerExcluded = errors.New("not a connectivity signal")
)

// breaker is the provider's circuit breaker: a sony/gobreaker two-step
// breaker that only program calls in the closed state pass, plus one
// background prober. Calls never act as probes: while the breaker is not
// closed, every call is answered at once without touching the client. The
// prober, started when the breaker opens, sends one PING at a time after a
// jittered wait and closes the breaker on the first success. It is
// independent of the executor: it sees outcomes, never the wire.
type breaker struct {
	cb       *gobreaker.TwoStepCircuitBreaker[struct{}]
	interval time.Duration
	probe    func(ctx context.Context) error
	// notify is told every state change (after it happened); nil: none.
	notify func(BreakerState)

	probing atomic.Bool // a PING of the prober is in flight
	trips   atomic.Uint64
	rand    func(n int64) int64

	mu      sync.Mutex
	running bool // the prober goroutine exists
	shut    bool // shutdown has begun: no new prober
	stop    chan struct{}
	wg      sync.WaitGroup
}

// newBreaker returns the breaker for opts (nil when opts turn it off);
// probe is the recovery check, called with a context bounded by the
// caller; notify (optional) is told every change.
func newBreaker(opts BreakerOptions, probe func(ctx context.Context) error, notify func(BreakerState)) *breaker {
	if opts.Threshold == 0 {
		return nil
	}
	b := &breaker{interval: opts.ProbeInterval, probe: probe, notify: notify, stop: make(chan struct{}), rand: rand.Int64N}
	threshold := uint32(opts.Threshold)
	b.cb = gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{
		Name:        "redisrate",
		MaxRequests: 1, // the single probe; its success closes the breaker
		// Open -> half-open after the shortest jittered wait, so that
		// the prober always finds the breaker ready for its probe.
		Timeout:       opts.ProbeInterval / 2,
		ReadyToTrip:   func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= threshold },
		IsExcluded:    func(err error) bool { return errors.Is(err, errBreakerExcluded) },
		OnStateChange: b.stateChanged,
	})
	return b
}

// admit is the hook before a program call to the breaker's target. With
// the breaker closed it returns done, which the caller must call with what
// the send reported, and true; else false (the call is not sent). A nil
// breaker admits everything.
func (b *breaker) admit() (done func(Sent), ok bool) {
	if b == nil {
		return noRecord, true
	}
	if b.cb.State() == gobreaker.StateClosed {
		if d, err := b.cb.Allow(); err == nil {
			return func(s Sent) { d(breakerSignal(s)) }, true
		}
	}
	return nil, false
}

func noRecord(Sent) {}

// state reports the breaker's state.
func (b *breaker) state() BreakerState {
	if b == nil {
		return BreakerDisabled
	}
	if b.cb.State() == gobreaker.StateClosed {
		return BreakerClosed
	}
	if b.probing.Load() {
		return BreakerHalfOpen
	}
	return BreakerOpen
}

// stateChanged is gobreaker's OnStateChange (called under its lock: it
// only starts the prober and reports).
func (b *breaker) stateChanged(_ string, from, to gobreaker.State) {
	if to == gobreaker.StateOpen && from == gobreaker.StateClosed {
		b.trips.Add(1)
		b.startProber()
	}
	var s BreakerState
	switch {
	case to == gobreaker.StateClosed:
		s = BreakerClosed
	case from == gobreaker.StateClosed:
		s = BreakerOpen
	default:
		return
	}
	if b.notify != nil {
		b.notify(s)
	}
}

// startProber starts the prober goroutine unless it runs or the breaker is
// shut down.
func (b *breaker) startProber() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.shut || b.running {
		return
	}
	b.running = true
	b.wg.Add(1)
	go b.probeLoop()
}

// probeLoop probes until the breaker is closed or shut down: wait a
// jittered interval, take the half-open slot, PING, record the result.
func (b *breaker) probeLoop() {
	defer b.wg.Done()
	timer := time.NewTimer(b.wait())
	defer timer.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-timer.C:
		}
		if b.cb.State() == gobreaker.StateClosed {
			b.exitProber()
			return
		}
		if done, err := b.cb.Allow(); err == nil {
			b.probing.Store(true)
			perr := b.probe(context.Background())
			b.probing.Store(false)
			if perr == nil {
				done(nil)
			} else {
				done(errBreakerFailure)
			}
			if b.cb.State() == gobreaker.StateClosed {
				b.exitProber()
				return
			}
		}
		timer.Reset(b.wait())
	}
}

// exitProber marks the prober gone once the breaker closed; if it opened
// again meanwhile (its stateChanged found the prober still running), it
// starts a new one, so an open breaker always has a prober.
func (b *breaker) exitProber() {
	b.mu.Lock()
	b.running = false
	b.mu.Unlock()
	if b.cb.State() != gobreaker.StateClosed {
		b.startProber()
	}
}

// wait draws the next probe wait from [interval/2, interval].
func (b *breaker) wait() time.Duration {
	half := b.interval / 2
	return half + time.Duration(b.rand(int64(b.interval-half)+1))
}

// shutdown stops the prober and waits for it (a probe in flight ends within
// its command timeout).
func (b *breaker) shutdown() {
	if b == nil {
		return
	}
	b.mu.Lock()
	if !b.shut {
		b.shut = true
		close(b.stop)
	}
	b.mu.Unlock()
	b.wg.Wait()
}

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
