package rls

import (
	"context"
	"time"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// setMembers returns the plans decided by one EvaluateSet (ADR 0031 §1):
// the enforced charges and checks when there are 2..MaxSetMembers of
// them, every policy may join a set (ratelimit.CanJoinSet), every cost is
// within its policy's MaxCost and no two count one key (the same policy
// and scoped subject: the set program would admit that key twice). Else
// nil: they are charged in order. Shadow plans are never members.
func setMembers(plans []*plan) []*plan {
	var set []*plan
	for _, p := range plans {
		if p.kind != kindCharge && p.kind != kindCheck || p.shadow {
			continue
		}
		if p.cost > p.policy.MaxCost() || ratelimit.CanJoinSet(p.policy) != nil {
			return nil
		}
		for _, q := range set {
			if q.policy.ID() == p.policy.ID() && q.policy.Subject(q.subject) == p.policy.Subject(p.subject) {
				return nil
			}
		}
		set = append(set, p)
	}
	if len(set) < 2 || len(set) > ratelimit.MaxSetMembers {
		return nil
	}
	return set
}

// decideSet asks d for set in one EvaluateSet, each member with its own
// subject and cost (a check: one unit, given back after when the set
// admits), and maps the outcome back to the plans. An admitted set
// decides every member. A denied set wrote nothing (on one server; in a
// cluster the provider gave back the slot groups before the denying one):
// every member reports its own decision, a member that would have
// admitted its remaining as it stands, and nothing is refunded here. A
// set that failed is the request's failure, on the member it names. It
// returns that failure and whether the request is refused.
func decideSet(ctx context.Context, d Decider, set []*plan, deadline time.Time) (*failure, bool) {
	req := ratelimit.SetRequest{Members: make([]ratelimit.PolicyID, len(set)), Subjects: make([]ratelimit.SubjectDigest, len(set)),
		Costs: make([]int64, len(set)), Deadline: deadline}
	for i, p := range set {
		p.setMember = true
		req.Members[i], req.Subjects[i], req.Costs[i] = p.policy.ID(), p.subject, p.cost
	}
	out := d.EvaluateSet(ctx, req)
	ev, ok := out.(ratelimit.Evaluated)
	if !ok {
		// Undecided: on the member the outcome names (the first when it
		// names none); the others are not asked, as after an ordered
		// failure.
		p := set[0]
		for _, q := range set {
			if q.policy.ID() == ratelimit.PolicyOf(out) {
				p = q
				break
			}
		}
		p.outcome, p.undecide = out, true
		return &failure{outcome: out}, true
	}
	admitted := ev.Decision.Allowed
	decided := memberDecisions(set, ev.Members)
	for i, p := range set {
		p.outcome = out
		dec, ok := decided[i]
		if !ok {
			continue // not asked (a denied set answered by another member)
		}
		p.decided, p.dec = true, dec
		if !dec.Allowed {
			p.over = true
			continue
		}
		if p.kind == kindCheck {
			p.refund = admitted && !dec.Receipt.IsZero()
		}
		if !admitted || p.kind == kindCheck {
			// As it stands: nothing was taken (a denied set), or the
			// check's probe is given back.
			p.dec.Remaining = min(p.dec.Remaining+p.cost, p.dec.Limit)
		}
	}
	return nil, !admitted
}

// memberDecisions maps a set's Evaluated.Members (in member order) to the
// members' indexes: one decision per member when none is missing; else
// (a denied set whose later members were not asked) each decision to the
// next member of its policy.
func memberDecisions(set []*plan, members []ratelimit.Decision) map[int]ratelimit.Decision {
	out := make(map[int]ratelimit.Decision, len(members))
	if len(members) == len(set) {
		for i, dec := range members {
			out[i] = dec
		}
		return out
	}
	next := 0
	for _, dec := range members {
		for i := next; i < len(set); i++ {
			if set[i].policy.ID() == dec.PolicyID {
				out[i], next = dec, i+1
				break
			}
		}
	}
	return out
}
