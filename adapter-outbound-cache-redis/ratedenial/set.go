package ratedenial

import (
	"context"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redisrate"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// EvaluateSet implements ratelimit.EdgePort over the decorated port's
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
	defer ratelimit.Recover(&out, req.FirstMember(), "ratedenial")
	if ctx == nil || req.Validate() != nil {
		return c.inner.EvaluateSet(ctx, req) // its precheck answers the bad request
	}
	t0 := c.now()
	if c.n.Load() > 0 {
		for i, id := range req.Members {
			pc := c.policies[id]
			if pc == nil || !pc.on {
				continue
			}
			m := req.Member(i).ScopedTo(pc.policy)
			if hit, ok := c.serve(ctx, pc, m, t0); ok {
				d := hit.(ratelimit.Evaluated).Decision
				return ratelimit.Evaluated{Decision: d, Members: []ratelimit.Decision{d}}
			}
		}
	}
	g := c.gen.Load()
	out = c.inner.EvaluateSet(ctx, req)
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
				c.record(pc, req.Member(i).ScopedTo(pc.policy), d, t0, g)
			}
		}
	}
	return out
}

// Refund implements ratelimit.EdgePort over the decorated port's (ADR
// 0025). A refund gives units back, so this instance's cached denial of
// the subject under the receipt's policy is dropped first (it may no
// longer hold; other instances keep theirs until their retry-after: an
// under-admission only). It never panics and never returns nil.
func (c *Cache) Refund(ctx context.Context, req ratelimit.Request, r ratelimit.Receipt) ratelimit.Outcome {
	if pc := c.policies[req.PolicyID]; pc != nil && pc.on {
		if k, err := redisrate.StateKey(c.keys, pc.policy, req.SubjectDigest); err == nil {
			c.drop(k)
		}
	}
	return c.inner.Refund(ctx, req, r)
}
