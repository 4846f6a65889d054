package ratedenial

import (
	"context"
	"slices"

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
// would be denied until its retry-after. A set in which a policy repeats
// (for other subjects) always goes to the decorated port: a cached
// answer of one member could not say which of them it is. It never
// panics and never returns nil.
func (c *Cache) EvaluateSet(ctx context.Context, req ratelimit.SetRequest) (out ratelimit.Outcome) {
	defer ratelimit.Recover(&out, req.FirstMember(), "ratedenial")
	if ctx == nil || req.Validate() != nil {
		return c.inner.EvaluateSet(ctx, req) // its precheck answers the bad request
	}
	t0 := c.now()
	if c.n.Load() > 0 && !repeats(req.Members) {
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
	for j, d := range ev.Members {
		pc := c.policies[d.PolicyID]
		if d.Allowed || pc == nil || !pc.on {
			continue
		}
		if i := memberOf(req.Members, ev.Members, j); i >= 0 {
			c.record(pc, req.Member(i).ScopedTo(pc.policy), d, t0, g)
		}
	}
	return out
}

// repeats reports whether a policy ID occurs twice in ids.
func repeats(ids []ratelimit.PolicyID) bool {
	for i, id := range ids {
		if slices.Contains(ids[:i], id) {
			return true
		}
	}
	return false
}

// memberOf is the index of the member whose decision is decided[j], or -1
// when it cannot be told: Members are in member order, one per member
// when none is missing; with a member missing (not asked), the one member
// of that policy (a policy that repeats cannot be told then).
func memberOf(ids []ratelimit.PolicyID, decided []ratelimit.Decision, j int) int {
	if len(decided) == len(ids) {
		return j
	}
	id := decided[j].PolicyID
	i := slices.Index(ids, id)
	if i < 0 || slices.Contains(ids[i+1:], id) {
		return -1
	}
	return i
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
