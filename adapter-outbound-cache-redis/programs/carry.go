package programs

import "github.com/tech-log/tech-log-backend/shared-contract/ratelimit"

// Consumed is what a subject's state st under p holds of p's limit at
// serverNowMillis: the limit less what a decision at that instant would
// report remaining before its own cost (ADR 0039). A missing
// state has consumed nothing. A state the model refuses (incompatible,
// clock unsafe) counts as the whole limit: a change never turns doubt into
// budget.
func Consumed(p ratelimit.Policy, st State, serverNowMillis int64) int64 {
	if len(st) == 0 {
		return 0
	}
	r, _ := Evaluate(p, st, serverNowMillis, 1)
	remaining := r.Remaining
	switch r.Status {
	case StatusAllowed:
		remaining = min(r.Remaining+1, r.Limit) // before this probe's unit
	case StatusDenied:
	default:
		return p.Limit()
	}
	return max(0, p.Limit()-remaining)
}

// Carry is the rule of a change of limit (ADR 0039): the state succ
// starts from, for a subject
// whose state under pred (another policy of its plan family, or an earlier
// revision) is predState at serverNowMillis. What pred's state holds of its
// limit (Consumed) is charged to succ at that instant, at most succ's limit,
// by succ's own charge (Charge): so the units already admitted keep
// counting, at succ's pace, and the subject is admitted in the window of
// the change at most max(pred's limit, succ's limit) plus what succ adds
// from then on, never both limits. Nothing consumed is a missing state (a
// full budget).
func Carry(pred ratelimit.Policy, predState State, succ ratelimit.Policy, serverNowMillis int64) State {
	units := CarriedUnits(pred, predState, succ, serverNowMillis)
	if units < 1 {
		return nil
	}
	st, _ := ChargedState(succ, nil, serverNowMillis, units)
	return st
}

// CarriedUnits is what succ takes over from pred's state predState at
// serverNowMillis (Carry's rule): what predState holds of pred's limit,
// at most succ's limit.
func CarriedUnits(pred ratelimit.Policy, predState State, succ ratelimit.Policy, serverNowMillis int64) int64 {
	return min(Consumed(pred, predState, serverNowMillis), succ.Limit())
}

// ChargedState is st under p charged with units at serverNowMillis
// (Charge) and the TTL in milliseconds a program would write it with
// (Reply.ExpiryMillis); nil and 0 when the model refuses the charge.
func ChargedState(p ratelimit.Policy, st State, serverNowMillis, units int64) (State, int64) {
	r, next := Charge(p, st, serverNowMillis, units)
	if r.Status != StatusAllowed {
		return nil, 0
	}
	return next, r.ExpiryMillis(p)
}
