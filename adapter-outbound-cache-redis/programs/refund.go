package programs

import "github.com/tech-log/tech-log-backend/shared-contract/ratelimit"

// Refund is the reference model of the refund programs (RefundFor, ADR
// 0025): what the refund program for p answers, and the state it leaves,
// when it runs on a key holding st at serverNowMillis to give back one
// admission of the given cost made at atMillis (the effectiveNowMillis of
// that admission's ALLOWED reply: its receipt). The returned State is st
// when nothing was written, nil when the key was deleted, and the value
// written otherwise (its TTL is Reply.ExpiryMillis).
//
// It checks the arguments, the clock and the state exactly as Evaluate does
// (atMillis outside 0..MaxServerMillis is StatusInvalid, after the clock
// check), then gives back exactly and saturating, never more than the state
// holds: the fixed window takes min(cost, count) off the count while the
// admission's window is the current one; the sliding counter takes
// min(cost, n) off the current window's count n or off the previous
// window's when the admission is in that one; the token bucket adds cost
// tokens to the refilled level, at most up to a full bucket; GCRA moves its
// theoretical arrival time back by cost emission intervals, never before
// the effective instant; the sliding log removes the newest kept entry
// (atMillis, cost). Anything else (a rolled window, a full bucket, a TAT in
// the past, no such entry) writes nothing. A state left empty is deleted.
//
// The reply is StatusAllowed with RetryAfterMillis replaced by the units
// given back (for the token bucket and GCRA the scaled amount rounded up to
// whole units; 0 when nothing was given back), Remaining and ResetAtMillis
// as the state left answers them. Reply.Check does not apply to it.
func Refund(p ratelimit.Policy, st State, serverNowMillis, cost, atMillis int64) (Reply, State) {
	var c calc
	return refund(p, st, serverNowMillis, 0, cost, atMillis, &c)
}

// RefundMicros is Refund with the server's TIME at serverNowMicros
// microseconds (EvaluateMicros): GCRA's refund never moves TAT before that
// microsecond.
func RefundMicros(p ratelimit.Policy, st State, serverNowMicros, cost, atMillis int64) (Reply, State) {
	var c calc
	ms, frac := splitMicros(serverNowMicros)
	return refund(p, st, ms, frac, cost, atMillis, &c)
}

func refund(p ratelimit.Policy, st State, now, frac, cost, at int64, c *calc) (Reply, State) {
	// The program checks the receipt's instant after the clock, before the
	// state is read.
	if !p.IsZero() && cost >= 1 && cost <= p.Limit() && now >= 0 && now <= ratelimit.MaxServerMillis &&
		(at < 0 || at > ratelimit.MaxServerMillis) {
		return fail(StatusInvalid, now), st
	}
	n, f, eff, refusal, refused := admit(p, st, now, cost, c)
	if refused {
		return refusal, st
	}
	r, next := modelOf(n.alg).refund(n, step{st: st, f: f, now: now, eff: eff, frac: gcraFrac(now, eff, frac), units: cost, at: at, rev: p.Revision(), c: c})
	if r.Status == StatusAllowed && next != nil && !sameState(next, st) {
		c.add(c.sub(r.ResetAtMillis, now), n.grace)
	}
	return r, next
}

func sameState(a, b State) bool { return string(a) == string(b) && (a == nil) == (b == nil) }
