package rateplan

import (
	"context"
	"errors"
	"fmt"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// Observer is told, for every request of a base policy some plan maps,
// the plan that decided it (its effective plan; "" when the assignment
// could not be read) and the outcome. It must be safe for concurrent use
// and fast.
type Observer func(plan ratelimit.PlanID, base ratelimit.PolicyID, out ratelimit.Outcome)

// Port is the plan decorator, a ratelimit.EdgePort: a request (or a set
// member) mapped to a base policy that some plan maps is decided by the
// policy its subject's plan maps it to (Plans.Resolve); every other one
// passes as it is. The plan comes from a ratelimit.PlanSource, never from
// the request: nothing a client sends chooses it. A plan that cannot be
// read is Unavailable (nothing was sent): a guessed plan could admit more
// than the subject's own.
type Port struct {
	inner   ratelimit.EdgePort
	plans   ratelimit.Plans
	src     ratelimit.PlanSource
	observe Observer
}

var _ ratelimit.EdgePort = (*Port)(nil)

// NewPort returns the decorator over inner; observe may be nil.
func NewPort(inner ratelimit.EdgePort, plans ratelimit.Plans, src ratelimit.PlanSource, observe Observer) (*Port, error) {
	if inner == nil || src == nil {
		return nil, errors.New("rateplan: port: inner port and plan source are required")
	}
	if plans.IsZero() {
		return nil, errors.New("rateplan: port: no plans")
	}
	return &Port{inner: inner, plans: plans, src: src, observe: observe}, nil
}

// planOf reads subject's effective plan within the request's deadline;
// the outcome is not nil when it could not be read.
func (p *Port) planOf(ctx context.Context, base ratelimit.PolicyID, subject ratelimit.SubjectDigest, req ratelimit.Request) (ratelimit.PlanID, ratelimit.Outcome) {
	dctx, cancel := context.WithDeadline(ctx, req.EffectiveDeadline(ctx))
	defer cancel()
	plan, err := p.src.PlanOf(dctx, subject)
	if err != nil {
		cat := ratelimit.CategoryConnection
		if dctx.Err() != nil {
			cat = ratelimit.CategoryDeadline
		}
		return "", ratelimit.Unavailable{PolicyID: base.Known(), Category: cat, Cause: fmt.Errorf("rateplan: the subject's plan is unknown, nothing was sent: %w", err)}
	}
	return p.plans.Effective(plan), nil
}

// Evaluate decides req under the policy its subject's plan maps
// req.PolicyID to.
func (p *Port) Evaluate(ctx context.Context, req ratelimit.Request) (out ratelimit.Outcome) {
	defer ratelimit.Recover(&out, req.PolicyID, "rateplan")
	base := req.PolicyID
	if !p.plans.Mapped(base) {
		return p.inner.Evaluate(ctx, req)
	}
	plan, fail := p.planOf(ctx, base, req.SubjectDigest, req)
	if fail != nil {
		p.observed("", base, fail)
		return fail
	}
	req.PolicyID = p.plans.Resolve(plan, base)
	out = p.inner.Evaluate(ctx, req)
	p.observed(plan, base, out)
	return out
}

// EvaluateSet resolves every member some plan maps, each for its own
// subject (SetRequest.Subjects) or the set's.
func (p *Port) EvaluateSet(ctx context.Context, req ratelimit.SetRequest) (out ratelimit.Outcome) {
	defer ratelimit.Recover(&out, firstMember(req), "rateplan")
	var members []ratelimit.PolicyID
	plans := map[ratelimit.SubjectDigest]ratelimit.PlanID{}
	var first ratelimit.PolicyID
	var firstPlan ratelimit.PlanID
	for i, base := range req.Members {
		if !p.plans.Mapped(base) {
			continue
		}
		subject := req.SubjectDigest
		if req.Subjects != nil {
			subject = req.Subjects[i]
		}
		plan, ok := plans[subject]
		if !ok {
			var fail ratelimit.Outcome
			plan, fail = p.planOf(ctx, base, subject, ratelimit.Request{Deadline: req.Deadline})
			if fail != nil {
				p.observed("", base, fail)
				return fail
			}
			plans[subject] = plan
		}
		if members == nil {
			members = append([]ratelimit.PolicyID(nil), req.Members...)
			first, firstPlan = base, plan
		}
		members[i] = p.plans.Resolve(plan, base)
	}
	if members == nil {
		return p.inner.EvaluateSet(ctx, req)
	}
	req.Members = members
	out = p.inner.EvaluateSet(ctx, req)
	p.observed(firstPlan, first, out)
	return out
}

func firstMember(req ratelimit.SetRequest) ratelimit.PolicyID {
	if len(req.Members) > 0 {
		return req.Members[0]
	}
	return ""
}

// Refund gives back under the policy the receipt was taken under when it
// is one of req.PolicyID's plan policies (the subject's plan may have
// changed since; a receipt of another policy is refused by the provider).
func (p *Port) Refund(ctx context.Context, req ratelimit.Request, r ratelimit.Receipt) (out ratelimit.Outcome) {
	defer ratelimit.Recover(&out, req.PolicyID, "rateplan")
	if p.plans.Mapped(req.PolicyID) {
		for _, id := range p.plans.Family(req.PolicyID) {
			if id == r.PolicyID() {
				req.PolicyID = id
				break
			}
		}
	}
	return p.inner.Refund(ctx, req, r)
}

func (p *Port) observed(plan ratelimit.PlanID, base ratelimit.PolicyID, out ratelimit.Outcome) {
	if p.observe != nil {
		p.observe(plan, base, out)
	}
}
