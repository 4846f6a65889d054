package programs

import "github.com/tech-log/tech-log-backend/shared-contract/ratelimit"

// Charge is the reference model of the reconciliation programs
// (ChargeFor): what the charge program for p answers, and the state it
// leaves, when it runs on a key holding st at serverNowMillis for units.
// It checks the state, the clock and the arguments exactly as Evaluate
// does (the same StatusInvalid, StatusStateIncompatible and
// StatusClockUnsafe replies, nothing written), and then consumes without
// denying, saturating at the limit: the fixed window and the sliding
// counter add units to the current window's count, at most the limit; the
// token bucket takes units from the refilled level, at least 0; the sliding
// log appends one entry of min(units, limit - kept sum) unless that is 0.
// The reply
// is always StatusAllowed ("charged") with RetryAfterMillis 0; its TTL is
// Reply.ExpiryMillis, as for an allowed decision.
func Charge(p ratelimit.Policy, st State, serverNowMillis, units int64) (Reply, State) {
	var c calc
	return charge(p, st, serverNowMillis, 0, units, &c)
}

// ChargeMicros is Charge with the server's TIME at serverNowMicros
// microseconds (EvaluateMicros). GCRA's charge moves the theoretical
// arrival time to max(TAT, min(max(TAT, now) + units*T, now + Burst*T)).
func ChargeMicros(p ratelimit.Policy, st State, serverNowMicros, units int64) (Reply, State) {
	var c calc
	ms, frac := splitMicros(serverNowMicros)
	return charge(p, st, ms, frac, units, &c)
}

func charge(p ratelimit.Policy, st State, now, frac, units int64, c *calc) (Reply, State) {
	n, f, eff, refusal, refused := admit(p, st, now, units, c)
	if refused {
		return refusal, st
	}
	r, next := modelOf(n.alg).charge(n, step{st: st, f: f, now: now, eff: eff, frac: gcraFrac(now, eff, frac), units: units, rev: p.Revision(), c: c})
	if next == nil {
		return r, st
	}
	c.add(c.sub(r.ResetAtMillis, now), n.grace)
	return r, next
}
