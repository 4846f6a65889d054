package ratedenial

import (
	"context"
	"errors"
	"fmt"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redisrate"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

var _ ratelimit.SetPort = (*Cache)(nil)

// errNoSetPort is the cause of the Incompatible outcome EvaluateSet answers
// when the decorated port does not evaluate policy sets.
var errNoSetPort = errors.New("ratedenial: the decorated port does not implement ratelimit.SetPort")

// EvaluateSet implements ratelimit.SetPort over the decorated port's
// (ADR 0027). A member with a cached denial that applies (as Evaluate's:
// the member's subject, revision, a cost at least the cached one, not
// expired) answers the whole set, denied, with that member's decision as
// its only member: the set would be denied by that member and consume
// nothing, so the local answer is the server's. Otherwise the set goes to
// the decorated port, and each member that denied is recorded as a single
// denial is: a denied set wrote nothing, so each denying member alone
// would be denied until its retry-after. It never panics and never
// returns nil.
func (c *Cache) EvaluateSet(ctx context.Context, req ratelimit.SetRequest) (out ratelimit.Outcome) {
	defer func() {
		if r := recover(); r != nil {
			out = ratelimit.Incompatible{
				PolicyID: knownID(req.FirstMember()),
				Category: ratelimit.CategoryProgramFault,
				Cause:    fmt.Errorf("ratedenial: panic: %.200s", fmt.Sprint(r)),
			}
		}
	}()
	inner, ok := c.inner.(ratelimit.SetPort)
	if !ok {
		return ratelimit.Incompatible{PolicyID: knownID(req.FirstMember()), Category: ratelimit.CategoryProgramFault, Cause: errNoSetPort}
	}
	if ctx == nil || req.Validate() != nil {
		return inner.EvaluateSet(ctx, req) // its precheck answers the bad request
	}
	t0 := c.now()
	if c.n.Load() > 0 {
		for i, id := range req.Members {
			pc := c.policies[id]
			if pc == nil || !pc.on {
				continue
			}
			m := req.Member(i)
			m.SubjectDigest = pc.policy.Subject(m.SubjectDigest)
			if hit, ok := c.serve(ctx, pc, m, t0); ok {
				d := hit.(ratelimit.Evaluated).Decision
				return ratelimit.Evaluated{Decision: d, Members: []ratelimit.Decision{d}}
			}
		}
	}
	g := c.gen.Load()
	out = inner.EvaluateSet(ctx, req)
	ev, ok := out.(ratelimit.Evaluated)
	if !ok || ev.Decision.Allowed {
		return out
	}
	for _, d := range ev.Members {
		pc := c.policies[d.PolicyID]
		if d.Allowed || pc == nil || !pc.on {
			continue
		}
		for i, id := range req.Members {
			if id == d.PolicyID {
				m := req.Member(i)
				m.SubjectDigest = pc.policy.Subject(m.SubjectDigest)
				c.record(pc, m, d, t0, g)
			}
		}
	}
	return out
}

var _ ratelimit.Refunder = (*Cache)(nil)

// errNoRefunder is the cause of the Incompatible outcome Refund answers
// when the decorated port cannot refund.
var errNoRefunder = errors.New("ratedenial: the decorated port does not implement ratelimit.Refunder")

// Refund implements ratelimit.Refunder over the decorated port's (ADR
// 0025). A refund gives units back, so this instance's cached denial of
// the subject under the receipt's policy is dropped first (it may no
// longer hold; other instances keep theirs until their retry-after: an
// under-admission only). It never panics and never returns nil.
func (c *Cache) Refund(ctx context.Context, req ratelimit.Request, r ratelimit.Receipt) ratelimit.Outcome {
	inner, ok := c.inner.(ratelimit.Refunder)
	if !ok {
		return ratelimit.Incompatible{PolicyID: knownID(req.PolicyID), Category: ratelimit.CategoryProgramFault, Cause: errNoRefunder}
	}
	if pc := c.policies[req.PolicyID]; pc != nil && pc.on {
		if k, err := redisrate.StateKey(c.keys, pc.policy, req.SubjectDigest); err == nil {
			c.drop(k)
		}
	}
	return inner.Refund(ctx, req, r)
}
