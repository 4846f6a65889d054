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
	rev := p.Revision()
	var r Reply
	var next State
	switch n.alg {
	case ratelimit.AlgorithmFixedWindow:
		k := c.floor(eff, n.win)
		var used int64
		if f != nil && f[FieldWindow] == k {
			used = f[FieldCount]
		}
		charged := min(c.add(used, units), n.limit)
		reset := c.mul(c.add(k, 1), n.win)
		next = encodeState(n.alg, SchemaVersion, int64(n.alg), rev, eff, k, charged)
		r = Reply{StatusAllowed, now, eff, n.limit, c.sub(n.limit, charged), 0, reset}
	case ratelimit.AlgorithmSlidingWindowCounter:
		const q = ratelimit.WeightScale
		k := c.floor(eff, n.win)
		e := c.sub(eff, c.mul(k, n.win))
		var prev, cur int64
		if f != nil {
			switch f[FieldWindow] {
			case k:
				prev, cur = f[FieldPrevious], f[FieldCount]
			case k - 1:
				prev = f[FieldCount]
			}
		}
		charged := min(c.add(cur, units), n.limit)
		weight := c.ceil(c.mul(c.sub(n.win, e), q), n.win)
		remaining := max(0, c.sub(c.sub(n.limit, c.ceil(c.mul(prev, weight), q)), charged))
		reset := c.mul(c.add(k, 2), n.win)
		next = encodeState(n.alg, SchemaVersion, int64(n.alg), rev, eff, k, charged, prev)
		r = Reply{StatusAllowed, now, eff, n.limit, remaining, 0, reset}
	case ratelimit.AlgorithmGCRA, ratelimit.AlgorithmLeakyBucket:
		r, next = n.gcra(f, now, eff, gcraFrac(now, eff, frac), units, rev, true, c)
	case ratelimit.AlgorithmSlidingLog:
		r, next = n.slidingLog(st, f, now, eff, units, rev, true, c)
		if next == nil {
			return r, st
		}
	default:
		full := c.mul(n.limit, n.per)
		s := full
		if f != nil {
			s = c.add(c.mul(f[FieldTokens], n.per), f[FieldRemainder])
			elapsed := c.sub(eff, f[FieldLastObserved])
			if elapsed >= c.ceil(c.sub(full, s), n.rate) {
				s = full
			} else {
				s = c.add(s, c.mul(elapsed, n.rate))
			}
		}
		after := max(0, c.sub(s, c.mul(units, n.per)))
		tokens := c.floor(after, n.per)
		reset := c.add(eff, c.ceil(c.sub(full, after), n.rate))
		next = encodeState(n.alg, SchemaVersion, int64(n.alg), rev, eff, tokens, c.sub(after, c.mul(tokens, n.per)))
		r = Reply{StatusAllowed, now, eff, n.limit, tokens, 0, reset}
	}
	c.add(c.sub(r.ResetAtMillis, now), n.grace)
	return r, next
}
