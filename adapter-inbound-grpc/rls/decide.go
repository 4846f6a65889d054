package rls

import (
	"context"
	"sync"
	"time"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// failure is the first enforced undecided outcome of a request, if any.
type failure struct {
	outcome ratelimit.Outcome
}

// decide runs plans against d, all or nothing: every charge and check is
// asked at once (concurrently when there are several, so that the provider
// sends them together: one round trip), then read in descriptor order; an
// enforced denial or undecided outcome refuses the request, and every
// admission made is given back. Checks (hits_addend 0) are a one-unit
// admission given back at once. Negative hits are applied only when the
// request is admitted. It returns the first enforced undecided outcome in
// descriptor order (nil when none).
func (s *Service) decide(ctx context.Context, d Decider, plans []*plan, deadline time.Time) *failure {
	var fail *failure
	stopped := false
	ask(ctx, d, plans, deadline)
	for _, p := range plans {
		if p.kind != kindCharge && p.kind != kindCheck {
			continue
		}
		if p.outcome == nil {
			// Above its MaxCost: never admissible, denied without asking,
			// nothing consumed.
			p.over = true
			stopped = stopped || !p.shadow
			continue
		}
		ev, ok := p.outcome.(ratelimit.Evaluated)
		if !ok {
			p.undecide = true
			if !p.shadow && fail == nil {
				fail = &failure{outcome: p.outcome}
			}
			stopped = stopped || !p.shadow
			continue
		}
		p.decided, p.dec = true, ev.Decision
		if ev.Decision.Allowed {
			// A check's unit always goes back; a charge's only if the
			// request is refused (below).
			p.refund = !ev.Decision.Receipt.IsZero()
			if p.kind == kindCheck && p.dec.Remaining < p.dec.Limit {
				p.dec.Remaining++ // as it stands without the probe
			}
			continue
		}
		p.over = true
		stopped = stopped || !p.shadow
	}
	refundCtx, cancel := context.WithDeadline(context.WithoutCancel(ctx), deadline)
	defer cancel()
	for i := len(plans) - 1; i >= 0; i-- {
		p := plans[i]
		if !p.refund || (p.kind == kindCharge && !stopped) {
			continue
		}
		out := d.Refund(refundCtx, ratelimit.Request{PolicyID: p.policy.ID(), SubjectDigest: p.subject, Cost: p.dec.Receipt.Cost(), Deadline: deadline}, p.dec.Receipt)
		if !ratelimit.Admitted(out) {
			// The charge stays: under-admission only (ADR 0031).
			s.opt.Metrics.RefundFailed(ruleKey(p))
		}
	}
	if stopped {
		return fail
	}
	nowMillis := s.opt.Now().UnixMilli()
	for _, p := range plans {
		if p.kind != kindNegative {
			continue
		}
		units := min(p.cost, p.policy.MaxCost())
		if units < 1 {
			continue
		}
		// A receipt of units admitted now: the refund programs give back
		// at most what the subject's state holds, so the budget never
		// rises above the limit.
		r := ratelimit.NewReceipt(p.policy.ID(), p.policy.Revision(), units, nowMillis, ratelimit.GlobalRedis)
		out := d.Refund(refundCtx, ratelimit.Request{PolicyID: p.policy.ID(), SubjectDigest: p.subject, Cost: units, Deadline: deadline}, r)
		p.outcome = out
		if ev, ok := out.(ratelimit.Evaluated); ok {
			p.decided, p.dec = true, ev.Decision
		} else {
			s.opt.Metrics.RefundFailed(ruleKey(p))
		}
	}
	return nil
}

// ask evaluates the charge and check plans within their MaxCost and
// stores each outcome in its plan: on the caller's goroutine when there is
// one, else one goroutine each, all sent at once (the provider sends
// concurrent calls together or pipelines them), waiting for all.
func ask(ctx context.Context, d Decider, plans []*plan, deadline time.Time) {
	asked := make([]*plan, 0, len(plans))
	for _, p := range plans {
		if (p.kind == kindCharge || p.kind == kindCheck) && p.cost <= p.policy.MaxCost() {
			asked = append(asked, p)
		}
	}
	evaluate := func(p *plan) {
		p.outcome = d.Evaluate(ctx, ratelimit.Request{PolicyID: p.policy.ID(), SubjectDigest: p.subject, Cost: p.cost, Deadline: deadline})
	}
	if len(asked) == 1 {
		evaluate(asked[0])
		return
	}
	var wg sync.WaitGroup
	for _, p := range asked {
		wg.Go(func() { evaluate(p) })
	}
	wg.Wait()
}

func ruleKey(p *plan) string {
	if p.rule == nil {
		return ""
	}
	return p.rule.FullKey
}
