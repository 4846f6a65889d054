package programs

import "github.com/tech-log/tech-log-backend/shared-contract/ratelimit"

// gcraModel: GCRA `>B I6 I7` at the longest (l, d): l <= S < 2^46 (its
// field's top bits carry d's width, ADR 0029); d <= B*P + 999*R <= M <
// 2^56 (G1), written in the fewest of 4..7 bytes that hold it.
var gcraModel = model{
	alg:     ratelimit.AlgorithmGCRA,
	slug:    "gcra",
	setCode: 4,
	layout:  []field{{FieldLastObserved, lastObservedBytes}, {FieldArrival, maxArrivalWidth}},
	args: func(dst []any, p ratelimit.Policy) []any {
		rate, per, _, _ := p.Emission()
		return append(dst, rate, per)
	},
	fill: func(p ratelimit.Policy, n numbers) numbers {
		n.rate, n.per, _, _ = p.Emission()
		n.fullScaled = n.limit * n.per // G1: the burst offset B*P
		return n
	},
	compactArrival: true,
	validState: func(n numbers, f map[string]int64, c *calc) bool {
		return f[FieldArrival] <= c.add(n.fullScaled, c.mul(999, n.rate))
	},
	decide: func(n numbers, s step) (Reply, State) {
		return n.gcra(s.f, s.now, s.eff, s.frac, s.units, s.rev, false, s.c)
	},
	charge: func(n numbers, s step) (Reply, State) {
		return n.gcra(s.f, s.now, s.eff, s.frac, s.units, s.rev, true, s.c)
	},
	refund: numbers.refundGCRA,
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
	if n.delays && !charge && d > n.delayAfterScaled {
		delay = c.ceil(c.ceil(c.sub(d, n.delayAfterScaled), n.rate), 1000)
	}
	return Reply{StatusAllowed, now, eff, n.limit, left(after), delay, reset}, next
}

// refundGCRA moves the theoretical arrival time back by cost emission
// intervals, never before the effective instant; a TAT left at it is
// deleted.
func (n numbers) refundGCRA(s step) (Reply, State) {
	c, eff, fr := s.c, s.eff, s.frac
	bp := n.fullScaled
	d := n.gcraOffset(s.f, eff, fr, c)
	back := min(c.mul(s.units, n.per), d)
	after := c.sub(d, back)
	var left int64
	if after < bp {
		left = c.floor(c.sub(bp, after), n.per)
	}
	reset := c.add(eff, c.ceil(c.ceil(c.add(c.mul(fr, n.rate), after), n.rate), 1000))
	next := s.st
	if back > 0 {
		next = nil
		if after > 0 {
			next = encodeState(n.alg, SchemaVersion, int64(n.alg), s.rev, eff, c.add(after, c.mul(fr, n.rate)))
		}
	}
	return Reply{StatusAllowed, s.now, eff, n.limit, left, c.ceil(back, n.per), reset}, next
}
