package redisrate

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/programs"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// Bounds of FallbackOptions.
const (
	// DefaultFallbackMaxSubjects is FallbackOptions.MaxSubjects when 0: the
	// legacy local limiter's default table size.
	DefaultFallbackMaxSubjects = 10_000
	// MaxFallbackSubjects bounds FallbackOptions.MaxSubjects.
	MaxFallbackSubjects = 1_000_000
	// fallbackSweepEvery spaces the sweeps of a full table.
	fallbackSweepEvery = time.Second
)

// FallbackOptions configures a Fallback.
type FallbackOptions struct {
	// MaxSubjects bounds the local table (subjects of every local-fallback
	// policy together), 1..MaxFallbackSubjects; 0 means
	// DefaultFallbackMaxSubjects. A subject that finds the table full of
	// live state is not decided locally: the Unavailable outcome stands.
	MaxSubjects int
	// Now is the local clock (optional; time.Now).
	Now func() time.Time
}

// Fallback is the local emergency fallback (docs/degraded-mode.md): an
// EdgePort over a Provider that, for policies whose FailurePolicy is
// ratelimit.LocalFallback, answers an Unavailable{connection} or
// Unavailable{circuit_open} outcome with a local decision: the programs' Go
// reference model (programs.Evaluate) run in memory on this instance's share
// of the limit (Policy.FallbackShare), with Source LocalEmergency and
// Certainty ApproximateLocal. Every other outcome, and every outcome of a
// fail-closed policy, passes through unchanged: Indeterminate (the call may
// have consumed) and Incompatible never fall back.
//
// What an instance admits locally is remembered per subject as a pending
// charge, to be charged to the global state once Redis answers again
// (reconciliation). It is safe for concurrent use.
type Fallback struct {
	p     *Provider
	local map[ratelimit.PolicyID]*localPolicy
	max   int
	now   func() time.Time

	mu        sync.Mutex
	table     map[string]*localEntry // by state key
	lastSweep time.Time

	// Background reconciliation (started when the breaker closes).
	bgMu      sync.Mutex
	bgRunning bool
	bgShut    bool
	bgCtx     context.Context // cancelled by Close
	bgCancel  context.CancelFunc
	wg        sync.WaitGroup
}

var _ ratelimit.EdgePort = (*Fallback)(nil)

// localPolicy is a local-fallback policy and its share.
type localPolicy struct {
	global ratelimit.Policy
	share  ratelimit.Policy // the same algorithm with the limit of one instance
	ps     *policyState
	charge *script // the algorithm's reconciliation program
}

// localEntry is one subject's local state.
type localEntry struct {
	policy *localPolicy
	state  programs.State
	// expiresAt (local ms) is when state has expired, as its TTL in Redis
	// would have.
	expiresAt int64
	// pending is what this instance admitted locally and has not charged
	// to the global state yet.
	pending int64
	// charging: a charge of this entry is in flight (one at a time).
	charging bool
}

// ErrFallbackFull is the cause added to an Unavailable outcome that the
// fallback could not decide because its table was full.
var ErrFallbackFull = errors.New("local fallback table full")

// NewFallback returns the fallback over p. It fails if opts are invalid or
// a policy's share cannot be built. Policies of p that are not
// LocalFallback are passed through.
func NewFallback(p *Provider, opts FallbackOptions) (*Fallback, error) {
	if p == nil {
		return nil, fmt.Errorf("%w: provider: nil", ErrInvalidConfig)
	}
	if opts.MaxSubjects == 0 {
		opts.MaxSubjects = DefaultFallbackMaxSubjects
	}
	if opts.MaxSubjects < 1 || opts.MaxSubjects > MaxFallbackSubjects {
		return nil, fmt.Errorf("%w: FallbackOptions.MaxSubjects %d must be in 1..%d", ErrInvalidConfig, opts.MaxSubjects, MaxFallbackSubjects)
	}
	f := &Fallback{p: p, local: map[ratelimit.PolicyID]*localPolicy{}, max: opts.MaxSubjects, now: opts.Now, table: map[string]*localEntry{}}
	f.bgCtx, f.bgCancel = context.WithCancel(context.Background())
	if f.now == nil {
		f.now = time.Now
	}
	for id, ps := range p.policies {
		if ps.policy.FailurePolicy() != ratelimit.LocalFallback {
			continue
		}
		share, err := SharePolicy(ps.policy)
		if err != nil {
			return nil, fmt.Errorf("%w: policy %q: local share: %w", ErrInvalidConfig, id, err)
		}
		prog, ok := programs.ChargeFor(ps.policy.Algorithm())
		if !ok {
			return nil, fmt.Errorf("%w: policy %q: no charge program for %v", ErrInvalidConfig, id, ps.policy.Algorithm())
		}
		f.local[id] = &localPolicy{global: ps.policy, share: share, ps: ps, charge: newScript(prog)}
	}
	if len(f.local) > 0 {
		p.OnBreakerChange(func(s BreakerState) {
			if s == BreakerClosed {
				f.reconcileInBackground()
			}
		})
	}
	return f, nil
}

// SharePolicy returns the policy one instance enforces locally for the
// LocalFallback policy p: the same ID, revision, algorithm and windows with
// the limit (capacity) p.FallbackShare() and, for the token bucket, the
// refill rate divided by FallbackInstances (the period multiplied by it;
// when that is out of range, the refill tokens divided, rounded down, at
// least 1), failing closed.
func SharePolicy(p ratelimit.Policy) (ratelimit.Policy, error) {
	share := p.FallbackShare()
	if share < 1 {
		return ratelimit.Policy{}, fmt.Errorf("policy %q is not local-fallback", p.ID())
	}
	n := p.FallbackInstances()
	spec := ratelimit.PolicySpec{
		ID: p.ID(), Revision: p.Revision(), Algorithm: p.Algorithm(),
		MaxCost: min(p.MaxCost(), share), CleanupGrace: p.CleanupGrace(), MaxClockRegression: p.MaxClockRegression(),
		FailurePolicy: ratelimit.FailClosed,
	}
	switch v := p.Params().(type) {
	case ratelimit.FixedWindow:
		spec.Params = ratelimit.FixedWindow{Limit: share, Window: v.Window}
	case ratelimit.SlidingWindowCounter:
		spec.Params = ratelimit.SlidingWindowCounter{Limit: share, Window: v.Window}
	case ratelimit.TokenBucket:
		if v.RefillPeriod > 0 && n <= math.MaxInt64/int64(v.RefillPeriod) {
			spec.Params = ratelimit.TokenBucket{Capacity: share, RefillTokens: v.RefillTokens, RefillPeriod: v.RefillPeriod * time.Duration(n)}
			if sp, err := ratelimit.NewPolicy(spec); err == nil {
				return sp, nil
			}
		}
		spec.Params = ratelimit.TokenBucket{Capacity: share, RefillTokens: max(1, v.RefillTokens/n), RefillPeriod: v.RefillPeriod}
	default:
		return ratelimit.Policy{}, fmt.Errorf("policy %q: unknown parameters %T", p.ID(), v)
	}
	return ratelimit.NewPolicy(spec)
}

// Evaluate implements ratelimit.EdgePort: the provider's outcome, or for a
// LocalFallback policy whose outcome is Unavailable{connection} or
// Unavailable{circuit_open}, the local decision.
// It never panics and never returns nil.
func (f *Fallback) Evaluate(ctx context.Context, req ratelimit.Request) (out ratelimit.Outcome) {
	defer func() {
		if r := recover(); r != nil {
			out = ratelimit.Incompatible{
				PolicyID: knownID(req.PolicyID),
				Category: ratelimit.CategoryProgramFault,
				Cause:    fmt.Errorf("redisrate: fallback: %w: %s", errPanic, truncate(fmt.Sprint(r))),
			}
		}
	}()
	if lp := f.local[req.PolicyID]; lp != nil && ctx != nil && f.p.BreakerState() != BreakerOpen && f.p.BreakerState() != BreakerHalfOpen &&
		!f.p.now().Add(2*f.p.timeout).After(req.EffectiveDeadline(ctx)) {
		// Redis may answer again: first charge what this subject was
		// admitted locally, so the global decision below counts it (only
		// when the deadline leaves room for both calls; else the
		// background pass charges it).
		if key, err := stateKey(f.p.keys, lp.ps.id, lp.ps.revision, lp.ps.algorithm, req.SubjectDigest); err == nil {
			f.settle(ctx, lp, key)
		}
	}
	out = f.p.Evaluate(ctx, req)
	u, ok := out.(ratelimit.Unavailable)
	if !ok || (u.Category != ratelimit.CategoryConnection && u.Category != ratelimit.CategoryCircuitOpen) {
		return out
	}
	lp := f.local[req.PolicyID]
	if lp == nil {
		return out
	}
	// The provider's precheck passed (a refusal there has another
	// category), so the request is valid and its subject well-formed.
	key, err := stateKey(f.p.keys, lp.ps.id, lp.ps.revision, lp.ps.algorithm, req.SubjectDigest)
	if err != nil {
		return out
	}
	return f.decide(lp, key, req.Cost, u)
}

// decide runs the model for one request on the subject's local state.
func (f *Fallback) decide(lp *localPolicy, key string, cost int64, u ratelimit.Unavailable) ratelimit.Outcome {
	if cost > lp.share.Limit() {
		// Never admissible on this instance's share.
		return u
	}
	nowT := f.now()
	now := nowT.UnixMilli()
	f.mu.Lock()
	defer f.mu.Unlock()
	e := f.table[key]
	if e == nil {
		if len(f.table) >= f.max {
			f.sweep(nowT)
		}
		if len(f.table) >= f.max {
			u.Cause = errors.Join(u.Cause, ErrFallbackFull)
			return u
		}
		e = &localEntry{policy: lp}
		f.table[key] = e
	}
	st := e.state
	if st != nil && now >= e.expiresAt {
		st = nil
	}
	r, next := programs.Evaluate(lp.share, st, now, cost)
	switch r.Status {
	case programs.StatusAllowed:
		e.state = next
		e.expiresAt = now + r.ExpiryMillis(lp.share)
		e.pending += cost
	case programs.StatusDenied:
	default:
		// The local clock went back too far, or the model refused: no
		// local decision.
		return u
	}
	return ratelimit.Evaluated{Decision: ratelimit.Decision{
		Allowed:        r.Status == programs.StatusAllowed,
		Limit:          r.Limit,
		Remaining:      r.Remaining,
		RetryAfter:     millis(r.RetryAfterMillis),
		ResetAt:        time.UnixMilli(r.ResetAtMillis),
		PolicyID:       lp.global.ID(),
		PolicyRevision: lp.global.Revision(),
		Source:         ratelimit.LocalEmergency,
		Certainty:      ratelimit.ApproximateLocal,
	}}
}

// sweep drops entries whose local state has expired and that owe no
// charge, at most once per fallbackSweepEvery. Called with f.mu held.
func (f *Fallback) sweep(now time.Time) {
	if now.Sub(f.lastSweep) < fallbackSweepEvery && !f.lastSweep.IsZero() {
		return
	}
	f.lastSweep = now
	ms := now.UnixMilli()
	for k, e := range f.table {
		if e.pending == 0 && ms >= e.expiresAt {
			delete(f.table, k)
		}
	}
}

// Pending reports the local admits not yet charged to the global state,
// summed over subjects, per policy.
func (f *Fallback) Pending() map[ratelimit.PolicyID]int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[ratelimit.PolicyID]int64{}
	for _, e := range f.table {
		if e.pending > 0 {
			out[e.policy.global.ID()] += e.pending
		}
	}
	return out
}

// Subjects reports the number of subjects in the local table.
func (f *Fallback) Subjects() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.table)
}

// settle charges key's pending local admits to the global state, if any
// and no other charge of it is in flight. A charge that the server
// answered (always "charged") clears what it carried; any failure keeps it
// pending for a later attempt (after an Indeterminate one the same units
// may be charged twice: the conservative direction, and the charge
// saturates at the limit).
func (f *Fallback) settle(ctx context.Context, lp *localPolicy, key string) ratelimit.Outcome {
	f.mu.Lock()
	e := f.table[key]
	if e == nil || e.pending == 0 || e.charging {
		f.mu.Unlock()
		return nil
	}
	units := e.pending
	e.charging = true
	f.mu.Unlock()

	out := f.charge(ctx, lp, key, min(units, lp.global.Limit()))

	f.mu.Lock()
	e.charging = false
	if out.Kind() == ratelimit.KindEvaluated {
		e.pending -= units
	}
	f.mu.Unlock()
	return out
}

// charge runs lp's reconciliation program for units (1..limit) on key,
// bounded by the command timeout.
func (f *Fallback) charge(ctx context.Context, lp *localPolicy, key string, units int64) ratelimit.Outcome {
	if f.p.closed.Load() {
		return f.p.unavailable(lp.global.ID(), ratelimit.CategoryClosed, ErrClosed)
	}
	ctx, cancel := context.WithTimeout(ctx, 2*f.p.timeout)
	defer cancel()
	res := f.p.exec.run(ctx, lp.charge, key, lp.ps.argv, units, f.p.now().Add(f.p.timeout))
	return f.p.outcome(lp.ps, res)
}

// Reconcile charges every pending local admit to the global state, one
// subject at a time, and returns the units charged and the first failure
// (the rest stay pending). It is what the fallback runs in the background
// when the breaker closes; ctx bounds it.
func (f *Fallback) Reconcile(ctx context.Context) (charged int64, err error) {
	type item struct {
		lp  *localPolicy
		key string
	}
	f.mu.Lock()
	var items []item
	for k, e := range f.table {
		if e.pending > 0 {
			items = append(items, item{e.policy, k})
		}
	}
	f.mu.Unlock()
	for _, it := range items {
		if err := ctx.Err(); err != nil {
			return charged, err
		}
		var units int64
		f.mu.Lock()
		if e := f.table[it.key]; e != nil {
			units = e.pending
		}
		f.mu.Unlock()
		out := f.settle(ctx, it.lp, it.key)
		switch {
		case out == nil:
		case out.Kind() == ratelimit.KindEvaluated:
			charged += units
		case err == nil:
			err = fmt.Errorf("redisrate: reconcile %s: %v", it.lp.global.ID(), out)
		}
	}
	return charged, err
}

// reconcileInBackground starts one Reconcile unless one runs or the
// fallback is closed.
func (f *Fallback) reconcileInBackground() {
	f.bgMu.Lock()
	defer f.bgMu.Unlock()
	if f.bgShut || f.bgRunning {
		return
	}
	f.bgRunning = true
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		_, _ = f.Reconcile(f.bgCtx)
		f.bgMu.Lock()
		f.bgRunning = false
		f.bgMu.Unlock()
	}()
}

// Close stops a background reconciliation and waits for it (a charge in
// flight ends within its command timeout). It does not close the
// provider. Pending admits not charged by then are lost with the process.
func (f *Fallback) Close() {
	f.bgMu.Lock()
	if !f.bgShut {
		f.bgShut = true
		f.bgCancel()
	}
	f.bgMu.Unlock()
	f.wg.Wait()
}
