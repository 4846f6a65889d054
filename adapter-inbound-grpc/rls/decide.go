package rls

import (
	"context"
	"time"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// failure is the first enforced undecided outcome of a request, if any.
type failure struct {
	outcome ratelimit.Outcome
}

// decide runs plans against d, all or nothing. The enforced charges and
// checks go in one EvaluateSet when they can form a set (setMembers), else
// in descriptor order, the first enforced denial or undecided outcome
// stopping the charging and every admission made so far given back; shadow
// plans are asked on their own, in order, while nothing has refused the
// request. Checks (hits_addend 0) are a one-unit admission given back at
// once. Negative hits are applied only when the request is admitted. It
// returns the first enforced undecided outcome (nil when none).
func (s *Service) decide(ctx context.Context, d Decider, plans []*plan, deadline time.Time) *failure {
	var fail *failure
	stopped := false
	if set := setMembers(plans); set != nil {
		fail, stopped = decideSet(ctx, d, set, deadline)
	}
	for _, p := range plans {
		if p.kind != kindCharge && p.kind != kindCheck || p.setMember {
			continue
		}
		if stopped {
			continue // not asked: the request is already refused
		}
		cost := p.cost
		if cost > p.policy.MaxCost() {
			// Never admissible: denied without asking, nothing consumed.
			p.over = true
			if !p.shadow {
				stopped = true
			}
			continue
		}
		out := d.Evaluate(ctx, ratelimit.Request{PolicyID: p.policy.ID(), SubjectDigest: p.subject, Cost: cost, Deadline: deadline})
		p.outcome = out
		ev, ok := out.(ratelimit.Evaluated)
		if !ok {
			p.undecide = true
			if !p.shadow {
				stopped = true
				fail = &failure{outcome: out}
			}
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
		if !p.shadow {
			stopped = true
		}
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

func ruleKey(p *plan) string {
	if p.rule == nil {
		return ""
	}
	return p.rule.FullKey
}
