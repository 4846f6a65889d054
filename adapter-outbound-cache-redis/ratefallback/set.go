package ratefallback

import (
	"context"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// EvaluateSet implements ratelimit.EdgePort (ADR 0027). What this instance
// admitted locally for a local-fallback member and still owes is charged
// to Redis first, alone (the set's global decision then counts it, as a
// single request's does); then the provider decides the set. When Redis
// is unreachable (Unavailable{connection} or {circuit_open}, from the
// charge or the set) and every member is a local-fallback policy, the set
// is decided here, member by member on their local shares, all or
// nothing: the local states are written only when every member admits.
// A fail-closed member keeps the set failed closed. It never panics and
// never returns nil.
func (f *Fallback) EvaluateSet(ctx context.Context, req ratelimit.SetRequest) (out ratelimit.Outcome) {
	defer ratelimit.Recover(&out, req.FirstMember(), "ratefallback")
	if ctx == nil || req.Validate() != nil {
		return f.p.EvaluateSet(ctx, req) // its precheck answers the bad request
	}
	for i, id := range req.Members {
		lp := f.local[id]
		if lp == nil {
			continue
		}
		m := req.Member(i).ScopedTo(lp.global)
		if o := f.chargeOwed(ctx, m); o != nil {
			if u, ok := localCase(o); ok {
				return f.decideSet(req, u)
			}
			return o
		}
	}
	out = f.p.EvaluateSet(ctx, req)
	if u, ok := localCase(out); ok {
		return f.decideSet(req, u)
	}
	return out
}

// chargeOwed charges what m's subject owes under its local-fallback
// policy, alone, waiting (bounded by m's deadline) for a charge another
// request carries; nil when nothing is owed any more, else the failed
// charge's outcome (nothing of the set is sent then).
func (f *Fallback) chargeOwed(ctx context.Context, m ratelimit.Request) ratelimit.Outcome {
	key := entryKey(m)
	for range 2 {
		e, wait, units := f.take(key)
		switch {
		case e == nil:
			return nil
		case wait != nil:
			if !waitFor(ctx, m, wait) {
				return nil // the provider's precheck decides the deadline
			}
		default:
			o := f.p.Charge(ctx, m, units)
			charged := ratelimit.Admitted(o)
			f.settle(e, charged, false)
			if !charged {
				return o
			}
			return nil
		}
	}
	return nil
}

// localCase returns out as an Unavailable when it is one the local
// fallback decides (Redis unreachable: connection or circuit_open).
func localCase(out ratelimit.Outcome) (ratelimit.Unavailable, bool) {
	u, ok := out.(ratelimit.Unavailable)
	return u, ok && (u.Category == ratelimit.CategoryConnection || u.Category == ratelimit.CategoryCircuitOpen)
}

// decideSet decides req on the members' local shares, each member with
// its own subject and cost, all or nothing (the states are written only
// when every member admits); u stands when a
// member is not a local-fallback policy or cannot be decided locally.
func (f *Fallback) decideSet(req ratelimit.SetRequest, u ratelimit.Unavailable) ratelimit.Outcome {
	lps := make([]*localPolicy, len(req.Members))
	globals := make([]ratelimit.Policy, len(req.Members))
	for i, id := range req.Members {
		if lps[i] = f.local[id]; lps[i] == nil || req.Member(i).Cost > lps[i].share.Limit() {
			return u
		}
		globals[i] = lps[i].global
	}
	if err := req.ValidateScoped(globals); err != nil {
		return ratelimit.Unavailable{PolicyID: req.FirstMember(), Category: ratelimit.CategoryInvalidRequest, Cause: err}
	}
	nowT := f.now()
	f.mu.Lock()
	defer f.mu.Unlock()
	trials := make([]trial, len(lps))
	all := true
	for i, lp := range lps {
		m := req.Member(i).ScopedTo(lp.global)
		t, refused := f.try(lp, entryKey(m), m.SubjectDigest, m.Cost, nowT, u)
		if refused != nil {
			return refused
		}
		trials[i] = t
		all = all && t.decision().Allowed
	}
	members := make([]ratelimit.Decision, len(trials))
	for i, t := range trials {
		members[i] = t.decision()
		if all {
			cost := req.Member(i).Cost
			t.commit(nowT.UnixMilli(), cost)
			members[i].Receipt = t.receipt(cost)
		}
	}
	return ratelimit.Evaluated{Decision: members[ratelimit.Deciding(members)], Members: members}
}
