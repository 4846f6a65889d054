package programs

import "github.com/tech-log/tech-log-backend/shared-contract/ratelimit"

// The bucket family of the model: the token bucket, and GCRA with the
// leaky bucket that runs on it, each a level that drains at a rate.

// tokenBucket: T1 bounds every scaled level by capacity*period, T2 the reset
// instant and the TTL.
func (n numbers) tokenBucket(f map[string]int64, now, eff, cost, rev int64, c *calc) (Reply, State) {
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
	need := c.mul(cost, n.per)
	if s >= need {
		after := c.sub(s, need)
		tokens := c.floor(after, n.per)
		reset := c.add(eff, c.ceil(c.sub(full, after), n.rate))
		next := encodeState(n.alg, SchemaVersion, int64(n.alg), rev, eff, tokens, c.sub(after, c.mul(tokens, n.per)))
		return Reply{StatusAllowed, now, eff, n.limit, tokens, 0, reset}, next
	}
	return Reply{StatusDenied, now, eff, n.limit, c.floor(s, n.per), c.ceil(c.sub(need, s), n.rate),
		c.add(eff, c.ceil(c.sub(full, s), n.rate))}, nil
}

// gcraFrac is the microseconds into the effective millisecond: the server's
// own (frac) when eff is the server's millisecond, 0 when eff is a clamped
// lastObserved.
func gcraFrac(now, eff, frac int64) int64 {
	if eff != now {
		return 0
	}
	return frac
}

// gcraOffset is D = (TAT - (eff*1000 + frac) µs) * R when TAT is later than
// the effective instant, else 0 (docs/programs.md, GCRA). G1 bounds every
// product: delta * R is formed only when it is below d.
func (n numbers) gcraOffset(f map[string]int64, eff, frac int64, c *calc) int64 {
	if f == nil {
		return 0
	}
	d := f[FieldArrival]
	k := c.ceil(d, n.rate) // µs from l*1000 to TAT
	e := c.sub(eff, f[FieldLastObserved])
	if e >= c.ceil(k, 1000) {
		return 0
	}
	delta := c.add(c.mul(e, 1000), frac)
	if delta >= k {
		return 0
	}
	return c.sub(d, c.mul(delta, n.rate))
}

// gcra decides (or, with charge, charges) one request: G1 bounds every
// scaled quantity by B*P + 999*R, G2 the reset instant and the TTL. A
// leaky bucket's admission (ADR 0028) carries its delay in
// RetryAfterMillis: its slot max(TAT, now), D/R µs away, less delayAfter
// emission intervals, rounded up to a millisecond.
func (n numbers) gcra(f map[string]int64, now, eff, frac, cost, rev int64, charge bool, c *calc) (Reply, State) {
	bp := n.fullScaled
	d := n.gcraOffset(f, eff, frac, c)
	need := c.mul(cost, n.per)
	resetAt := func(x int64) int64 {
		return c.add(eff, c.ceil(c.ceil(c.add(c.mul(frac, n.rate), x), n.rate), 1000))
	}
	left := func(x int64) int64 {
		if x >= bp {
			return 0
		}
		return c.floor(c.sub(bp, x), n.per)
	}
	var after int64
	switch {
	case d <= c.sub(bp, need):
		after = c.add(d, need)
	case !charge:
		retry := c.ceil(c.add(frac, c.ceil(c.sub(d, c.sub(bp, need)), n.rate)), 1000)
		return Reply{StatusDenied, now, eff, n.limit, left(d), retry, resetAt(d)}, nil
	case d > bp:
		after = d
	default:
		after = bp
	}
	reset := resetAt(after)
	next := encodeState(n.alg, SchemaVersion, int64(n.alg), rev, eff, c.add(after, c.mul(frac, n.rate)))
	var delay int64
	if n.alg == ratelimit.AlgorithmLeakyBucket && !charge && d > n.delayAfterScaled {
		delay = c.ceil(c.ceil(c.sub(d, n.delayAfterScaled), n.rate), 1000)
	}
	return Reply{StatusAllowed, now, eff, n.limit, left(after), delay, reset}, next
}
