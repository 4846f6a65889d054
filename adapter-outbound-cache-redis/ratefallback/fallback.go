package ratefallback

import (
	"context"
	"sync"
	"time"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// Fallback is the local emergency fallback, a ratelimit.EdgePort over a
// Provider (see the package doc). For a LocalFallback policy:
//
//   - a subject with pending local admissions has them charged in the same
//     round trip as its next global decision (EvaluateAfterCharge), with the
//     shares of the other FallbackInstances-1 instances reserved beside them
//     (ADR 0017), so the decision counts them; its other requests on this
//     instance wait (bounded by their deadline) for that charge first;
//   - the provider's Unavailable{connection} and Unavailable{circuit_open}
//     are answered by the programs' Go model on this instance's share
//     (SharePolicy), Source LocalEmergency, Certainty ApproximateLocal;
//     every other outcome passes through.
//
// A background pass charges what no request carried, retrying failed
// charges with backoff, and drops pending admissions whose window has
// passed. It is safe for concurrent use; Close stops the pass.
type Fallback struct {
	p     Provider
	local map[ratelimit.PolicyID]*localPolicy
	max   int
	now   func() time.Time
	every time.Duration
	// budget is the deadline of a background charge.
	budget time.Duration

	mu        sync.Mutex
	table     map[string]*entry
	lastSweep time.Time
	dropped   uint64 // pending units swept with their window
	failures  uint64 // charges that failed

	stop     chan struct{}
	stopOnce sync.Once
	wg       sync.WaitGroup
}

var _ ratelimit.EdgePort = (*Fallback)(nil)

// localPolicy is a local-fallback policy and its share.
type localPolicy struct {
	global ratelimit.Policy
	share  ratelimit.Policy
	// reserve is what the other instances may have admitted on their
	// shares: (FallbackInstances-1) x share.
	reserve int64
}

// Evaluate implements ratelimit.EdgePort (see Fallback). It never panics
// and never returns nil.
func (f *Fallback) Evaluate(ctx context.Context, req ratelimit.Request) (out ratelimit.Outcome) {
	defer ratelimit.Recover(&out, req.PolicyID, "ratefallback")
	lp := f.local[req.PolicyID]
	if lp == nil || ctx == nil {
		return f.p.Evaluate(ctx, req) // its precheck answers the bad request
	}
	// A global policy's subject is ratelimit.GlobalSubject (ADR 0027): one
	// local entry, one pending charge for all clients.
	req = req.ScopedTo(lp.global)
	key := entryKey(req)
	for {
		e, wait, units := f.take(key)
		switch {
		case e == nil:
			out = f.p.Evaluate(ctx, req)
		case wait != nil:
			// Another request of this subject carries its charge: the
			// decision waits for it, so it counts the charge.
			if waitFor(ctx, req, wait) {
				continue
			}
			// The deadline passed or ctx is done: the provider's
			// precheck decides (Unavailable{deadline}).
			out = f.p.Evaluate(ctx, req)
		default:
			var charged bool
			out, charged = f.p.EvaluateAfterCharge(ctx, req, units)
			f.settle(e, charged, false)
		}
		return f.fallBack(lp, key, req, out)
	}
}

// fallBack returns the local decision when out is Unavailable{connection}
// or Unavailable{circuit_open}, and out otherwise.
func (f *Fallback) fallBack(lp *localPolicy, key string, req ratelimit.Request, out ratelimit.Outcome) ratelimit.Outcome {
	u, ok := out.(ratelimit.Unavailable)
	if !ok || (u.Category != ratelimit.CategoryConnection && u.Category != ratelimit.CategoryCircuitOpen) {
		return out
	}
	return f.decide(lp, key, req.SubjectDigest, req.Cost, u)
}

// waitFor waits until done is closed (true), or until ctx is done or the
// request's effective deadline passes (false).
func waitFor(ctx context.Context, req ratelimit.Request, done <-chan struct{}) bool {
	t := time.NewTimer(time.Until(req.EffectiveDeadline(ctx)))
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-ctx.Done():
		return false
	case <-t.C:
		return false
	}
}

// Close stops the background pass and waits for it (a charge in flight
// ends within its deadline). It does not close the provider. Pending
// admissions not charged by then are lost with the process.
func (f *Fallback) Close() {
	f.stopOnce.Do(func() { close(f.stop) })
	f.wg.Wait()
}

// owes reports whether e has something to charge.
func (e *entry) owes() bool { return e.pending > 0 || e.reserve > 0 }

// take looks key up: nil when it owes nothing (decide globally), the
// channel to wait on when a charge of it is in flight, or else e with
// the units to charge now (the caller must call settle).
func (f *Fallback) take(key string) (e *entry, wait <-chan struct{}, units int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	e = f.table[key]
	if e == nil || !e.owes() {
		return nil, nil, 0
	}
	if e.charging != nil {
		return e, e.charging, 0
	}
	f.start(e)
	return e, nil, min(e.takenPending+e.takenReserve, e.policy.global.Limit())
}

// start marks a charge of e in flight. Called with f.mu held.
func (f *Fallback) start(e *entry) {
	e.charging = make(chan struct{})
	e.takenPending, e.takenReserve = e.pending, e.reserve
}

// settle ends e's charge: charged clears what it carried (a charge
// saturates at the limit, so a cut-down one cleared it all too); a
// failure keeps it pending, and with back off, delays the background
// pass's next attempt of it (a failure of a charge a request carried
// does not: the request needed its round trip anyway). After a charge
// that may have run, the same units may be charged twice (the
// conservative direction).
func (f *Fallback) settle(e *entry, charged, back bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case charged:
		e.pending -= e.takenPending
		e.reserve -= e.takenReserve
		e.failures = 0
	case back:
		f.failures++
		e.failures++
		e.nextTry = f.now().Add(backoff(f.every, e.failures))
	}
	e.takenPending, e.takenReserve = 0, 0
	close(e.charging)
	e.charging = nil
}

// backoff is the wait after n failures in a row: every x 2^(n-1), at most
// maxBackoff.
func backoff(every time.Duration, n int) time.Duration {
	if n > 20 {
		return maxBackoff
	}
	return min(every<<(n-1), maxBackoff)
}
