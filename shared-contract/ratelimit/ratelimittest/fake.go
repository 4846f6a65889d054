package ratelimittest

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// Call is one Evaluate call a Fake saw.
type Call struct {
	// Request is the request as passed.
	Request ratelimit.Request
	// ContextDeadline is the context's deadline; zero when it had none.
	ContextDeadline time.Time
}

// Fake is a scriptable ratelimit.EdgePort. By default (Func, SetFunc,
// RefundFunc and Outcome all nil) it is a conformant in-memory limiter over
// the policies it was built with (NewFake): every policy is a budget of
// Limit units per subject and revision that never refills (so Run's
// hour-long windows hold), a denial consumes nothing, a set takes from
// every member or from none (its admitted members carry a receipt), a
// refund gives the receipt's units back, and requests are validated and
// prechecked as a provider does. Set Outcome to answer a fixed outcome (nil included, to
// test a caller's fail-closed handling) or Func to compute one. It records
// every call unless DontRecord is set (benchmarks). It is safe for
// concurrent use; change the exported fields only while no call is in
// flight.
type Fake struct {
	// Func, when set, computes every Evaluate answer.
	Func func(ctx context.Context, req ratelimit.Request) ratelimit.Outcome
	// SetFunc, when set, computes every EvaluateSet answer.
	SetFunc func(ctx context.Context, req ratelimit.SetRequest) ratelimit.Outcome
	// RefundFunc, when set, computes every Refund answer.
	RefundFunc func(ctx context.Context, req ratelimit.Request, r ratelimit.Receipt) ratelimit.Outcome
	// Outcome, when the method's Func is nil and UseOutcome or Outcome is
	// set, is answered as is (by every method).
	Outcome ratelimit.Outcome
	// UseOutcome makes a nil Outcome an answer (instead of the default
	// limiter).
	UseOutcome bool
	// DontRecord skips recording calls.
	DontRecord bool
	// Now is the limiter's clock (optional; time.Now).
	Now func() time.Time

	mu       sync.Mutex
	calls    []Call
	policies map[ratelimit.PolicyID]ratelimit.Policy
	used     *budgets
}

type budgets struct {
	mu   sync.Mutex
	used map[string]int64
}

var _ ratelimit.EdgePort = (*Fake)(nil)

// NewFake returns a Fake whose default limiter knows policies.
func NewFake(policies ...ratelimit.Policy) *Fake {
	return (&Fake{used: &budgets{used: map[string]int64{}}}).With(policies...)
}

// With returns a new Fake over policies that shares f's consumed budgets,
// like a second provider over the same server.
func (f *Fake) With(policies ...ratelimit.Policy) *Fake {
	g := &Fake{Now: f.Now, used: f.used, policies: map[ratelimit.PolicyID]ratelimit.Policy{}}
	if g.used == nil {
		g.used = &budgets{used: map[string]int64{}}
	}
	for _, p := range policies {
		g.policies[p.ID()] = p
	}
	return g
}

// FakePorts returns a NewPort whose ports are Fakes sharing one store (the
// first call builds it with NewFake, later calls use With), for running Run
// over the Fake or over a decorator wrapping it.
func FakePorts() NewPort {
	var mu sync.Mutex
	var base *Fake
	return func(_ *testing.T, policies []ratelimit.Policy) ratelimit.EdgePort {
		mu.Lock()
		defer mu.Unlock()
		if base == nil {
			base = NewFake(policies...)
			return base
		}
		return base.With(policies...)
	}
}

// Evaluate implements ratelimit.EdgePort.
func (f *Fake) Evaluate(ctx context.Context, req ratelimit.Request) ratelimit.Outcome {
	if !f.DontRecord {
		var dl time.Time
		if ctx != nil {
			dl, _ = ctx.Deadline()
		}
		f.mu.Lock()
		f.calls = append(f.calls, Call{Request: req, ContextDeadline: dl})
		f.mu.Unlock()
	}
	switch {
	case f.Func != nil:
		return f.Func(ctx, req)
	case f.Outcome != nil || f.UseOutcome:
		return f.Outcome
	}
	return f.limit(ctx, req)
}

// Calls returns a copy of the recorded calls, oldest first.
func (f *Fake) Calls() []Call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Call(nil), f.calls...)
}

// Requests returns the recorded requests, oldest first.
func (f *Fake) Requests() []ratelimit.Request {
	calls := f.Calls()
	out := make([]ratelimit.Request, len(calls))
	for i, c := range calls {
		out[i] = c.Request
	}
	return out
}

// EvaluateSet implements ratelimit.EdgePort: SetFunc's answer, Outcome,
// or the default limiter's all-or-nothing decision. It is not recorded in
// Calls.
func (f *Fake) EvaluateSet(ctx context.Context, req ratelimit.SetRequest) ratelimit.Outcome {
	switch {
	case f.SetFunc != nil:
		return f.SetFunc(ctx, req)
	case f.Outcome != nil || f.UseOutcome:
		return f.Outcome
	}
	return f.limitSet(ctx, req)
}

// Refund implements ratelimit.EdgePort: RefundFunc's answer, Outcome, or
// the default limiter's refund of the receipt's units (saturating at
// nothing used). It is not recorded in Calls.
func (f *Fake) Refund(ctx context.Context, req ratelimit.Request, r ratelimit.Receipt) ratelimit.Outcome {
	switch {
	case f.RefundFunc != nil:
		return f.RefundFunc(ctx, req, r)
	case f.Outcome != nil || f.UseOutcome:
		return f.Outcome
	}
	hint := time.Second
	p, ok := f.policies[req.PolicyID]
	if r.IsZero() || r.PolicyID() != req.PolicyID || !ok {
		return ratelimit.Unavailable{PolicyID: req.PolicyID.Known(), RetryAfter: hint, Category: ratelimit.CategoryInvalidRequest,
			Cause: fmt.Errorf("ratelimittest: %w: %v", ratelimit.ErrInvalidReceipt, r)}
	}
	d := ratelimit.Decision{Allowed: true, Limit: p.Limit(), PolicyID: p.ID(), PolicyRevision: p.Revision(), Source: ratelimit.GlobalRedis, Certainty: p.Certainty()}
	if r.Revision() != p.Revision() {
		return ratelimit.Evaluated{Decision: d}
	}
	key := budgetKey(p, req.SubjectDigest)
	f.used.mu.Lock()
	back := min(r.Cost(), f.used.used[key])
	f.used.used[key] -= back
	d.Remaining = p.Limit() - f.used.used[key]
	f.used.mu.Unlock()
	d.Refunded = back
	return ratelimit.Evaluated{Decision: d}
}

// budgetKey names the budget of p's subject.
func budgetKey(p ratelimit.Policy, subject ratelimit.SubjectDigest) string {
	return string(p.ID()) + "\x00" + strconv.FormatInt(p.Revision(), 10) + "\x00" + string(subject)
}

// precheck is the default limiter's refusal of req, or nil.
func (f *Fake) precheck(ctx context.Context, req ratelimit.Request, now time.Time) (ratelimit.Policy, ratelimit.Outcome) {
	hint := time.Second
	if ctx == nil {
		return ratelimit.Policy{}, ratelimit.Unavailable{RetryAfter: hint, Category: ratelimit.CategoryInvalidRequest, Cause: fmt.Errorf("ratelimittest: nil context")}
	}
	if err := req.Validate(); err != nil {
		return ratelimit.Policy{}, ratelimit.Unavailable{RetryAfter: hint, Category: ratelimit.CategoryInvalidRequest, Cause: err}
	}
	p, ok := f.policies[req.PolicyID]
	if !ok {
		return p, ratelimit.Unavailable{PolicyID: req.PolicyID, RetryAfter: hint, Category: ratelimit.CategoryUnknownPolicy, Cause: fmt.Errorf("ratelimittest: unknown policy %q", req.PolicyID)}
	}
	if err := req.ValidateFor(p); err != nil {
		return p, ratelimit.Unavailable{PolicyID: req.PolicyID, RetryAfter: hint, Category: ratelimit.CategoryInvalidRequest, Cause: err}
	}
	if ctx.Err() != nil || !req.EffectiveDeadline(ctx).After(now) {
		return p, ratelimit.Unavailable{PolicyID: req.PolicyID, RetryAfter: hint, Category: ratelimit.CategoryDeadline, Cause: ratelimit.ErrDeadlinePassed}
	}
	return p, nil
}

// clock is the limiter's now.
func (f *Fake) clock() time.Time {
	if f.Now != nil {
		return f.Now()
	}
	return time.Now()
}

// decision is the default limiter's decision of p for a budget with used
// units taken.
func decision(p ratelimit.Policy, allowed bool, used int64, now time.Time) ratelimit.Decision {
	window := time.Duration(p.WindowMillis()) * time.Millisecond
	d := ratelimit.Decision{
		Allowed:        allowed,
		Limit:          p.Limit(),
		Remaining:      p.Limit() - used,
		ResetAt:        now.Add(window),
		ServerNow:      now,
		PolicyID:       p.ID(),
		PolicyRevision: p.Revision(),
		Source:         ratelimit.GlobalRedis,
		Certainty:      p.Certainty(),
	}
	if !allowed {
		d.RetryAfter = window
	}
	return d
}

// limitSet is the default limiter's set: every member prechecked, then
// taken from all or none.
func (f *Fake) limitSet(ctx context.Context, req ratelimit.SetRequest) ratelimit.Outcome {
	now := f.clock()
	if err := req.Validate(); err != nil {
		return ratelimit.Unavailable{PolicyID: req.FirstMember().Known(), RetryAfter: time.Second, Category: ratelimit.CategoryInvalidRequest, Cause: err}
	}
	pols := make([]ratelimit.Policy, len(req.Members))
	for i := range req.Members {
		p, refused := f.precheck(ctx, req.Member(i), now)
		if refused != nil {
			return refused
		}
		pols[i] = p
	}
	if err := req.ValidateScoped(pols); err != nil {
		return ratelimit.Unavailable{PolicyID: req.FirstMember().Known(), RetryAfter: time.Second, Category: ratelimit.CategoryInvalidRequest, Cause: err}
	}
	f.used.mu.Lock()
	defer f.used.mu.Unlock()
	all := true
	for i, p := range pols {
		m := req.Member(i)
		all = all && f.used.used[budgetKey(p, m.SubjectDigest)]+m.Cost <= p.Limit()
	}
	members := make([]ratelimit.Decision, len(pols))
	for i, p := range pols {
		m := req.Member(i)
		key := budgetKey(p, m.SubjectDigest)
		used := f.used.used[key]
		allowed := used+m.Cost <= p.Limit()
		if allowed {
			// What the member answered (the set program's reply): its
			// state had it admitted, written only when every member does.
			used += m.Cost
		}
		if all {
			f.used.used[key] = used
		}
		members[i] = decision(p, allowed, used, now)
		if all {
			members[i].Receipt = ratelimit.NewReceipt(p.ID(), p.Revision(), m.Cost, now.UnixMilli(), ratelimit.GlobalRedis)
		}
	}
	return ratelimit.Evaluated{Decision: members[ratelimit.Deciding(members)], Members: members}
}

// limit is the default conformant limiter.
func (f *Fake) limit(ctx context.Context, req ratelimit.Request) ratelimit.Outcome {
	now := f.clock()
	p, refused := f.precheck(ctx, req, now)
	if refused != nil {
		return refused
	}
	key := budgetKey(p, req.SubjectDigest)
	f.used.mu.Lock()
	used := f.used.used[key]
	allowed := used+req.Cost <= p.Limit()
	if allowed {
		used += req.Cost
		f.used.used[key] = used
	}
	f.used.mu.Unlock()
	return ratelimit.Evaluated{Decision: decision(p, allowed, used, now)}
}
