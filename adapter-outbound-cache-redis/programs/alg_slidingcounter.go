package programs

import "github.com/tech-log/tech-log-backend/shared-contract/ratelimit"

// slidingCounterModel: sliding counter `>B I6 I6 I5 I5` (l, w, c, p):
// l, w <= S < 2^48; c, p <= M/Q < 2^40 (S1).
var slidingCounterModel = model{
	alg:     ratelimit.AlgorithmSlidingWindowCounter,
	slug:    "sliding-counter",
	setCode: 2,
	layout:  []field{{FieldLastObserved, 6}, {FieldWindow, 6}, {FieldCount, 5}, {FieldPrevious, 5}},
	args:    func(dst []any, p ratelimit.Policy) []any { return append(dst, p.WindowMillis()) },
	fill:    func(p ratelimit.Policy, n numbers) numbers { n.win = p.WindowMillis(); return n },
	validState: func(n numbers, f map[string]int64, c *calc) bool {
		return f[FieldWindow] == c.floor(f[FieldLastObserved], n.win) &&
			f[FieldCount] >= 1 && f[FieldCount] <= n.limit && f[FieldPrevious] <= n.limit
	},
	decide: func(n numbers, s step) (Reply, State) {
		return n.slidingCounter(s.f, s.now, s.eff, s.units, s.rev, s.c)
	},
	charge: numbers.chargeSlidingCounter,
	refund: func(n numbers, s step) (Reply, State) {
		return n.refundSlidingCounter(s.st, s.f, s.now, s.eff, s.units, s.at, s.rev, s.c)
	},
	checkDecision: func(n numbers, r Reply) error {
		eff, reset := r.EffectiveNowMillis, r.ResetAtMillis
		k := eff / n.win
		if reset != (k+2)*n.win && (r.Status == StatusAllowed || reset != (k+1)*n.win) {
			return malformed("resetAt %d is not a window end after window %d", reset, k)
		}
		return nil
	},
}

// slidingCounter: S1 bounds count*weight and budget*WeightScale, S2 the
// weight numerator and q*window, S3 the reset instant and the TTL.
func (n numbers) slidingCounter(f map[string]int64, now, eff, cost, rev int64, c *calc) (Reply, State) {
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
	weight := c.ceil(c.mul(c.sub(n.win, e), q), n.win)
	estimate := c.add(c.ceil(c.mul(prev, weight), q), cur)
	if c.add(estimate, cost) <= n.limit {
		reset := c.mul(c.add(k, 2), n.win)
		next := encodeState(n.alg, SchemaVersion, int64(n.alg), rev, eff, k, c.add(cur, cost), prev)
		return Reply{StatusAllowed, now, eff, n.limit, c.sub(c.sub(n.limit, estimate), cost), 0, reset}, next
	}
	earliest := func(b, p int64) int64 {
		w := q
		if p > 0 {
			w = c.floor(c.mul(b, q), p)
			if w > q {
				w = q
			}
		}
		return c.sub(n.win, c.floor(c.mul(w, n.win), q))
	}
	var retry int64
	if c.add(cur, cost) <= n.limit {
		retry = c.sub(earliest(c.sub(c.sub(n.limit, cur), cost), prev), e)
	} else {
		retry = c.add(c.sub(n.win, e), earliest(c.sub(n.limit, cost), cur))
	}
	remaining := c.sub(n.limit, estimate)
	if remaining < 0 {
		remaining = 0
	}
	reset := c.mul(c.add(k, 1), n.win)
	if cur > 0 {
		reset = c.add(reset, n.win)
	}
	return Reply{StatusDenied, now, eff, n.limit, remaining, retry, reset}, nil
}

// chargeSlidingCounter adds units to the current window's count, at most
// the limit.
func (n numbers) chargeSlidingCounter(s step) (Reply, State) {
	const q = ratelimit.WeightScale
	c, eff := s.c, s.eff
	k := c.floor(eff, n.win)
	e := c.sub(eff, c.mul(k, n.win))
	var prev, cur int64
	if s.f != nil {
		switch s.f[FieldWindow] {
		case k:
			prev, cur = s.f[FieldPrevious], s.f[FieldCount]
		case k - 1:
			prev = s.f[FieldCount]
		}
	}
	charged := min(c.add(cur, s.units), n.limit)
	weight := c.ceil(c.mul(c.sub(n.win, e), q), n.win)
	remaining := max(0, c.sub(c.sub(n.limit, c.ceil(c.mul(prev, weight), q)), charged))
	reset := c.mul(c.add(k, 2), n.win)
	next := encodeState(n.alg, SchemaVersion, int64(n.alg), s.rev, eff, k, charged, prev)
	return Reply{StatusAllowed, s.now, eff, n.limit, remaining, 0, reset}, next
}

// refundSlidingCounter gives back min(cost, n) of the admission's window
// when it is the current window k or k-1; when only the previous window's
// count is left, the state is written as of the last millisecond of k-1.
func (n numbers) refundSlidingCounter(st State, f map[string]int64, now, eff, cost, at, rev int64, c *calc) (Reply, State) {
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
	var back int64
	switch c.floor(at, n.win) {
	case k:
		back = min(cost, cur)
		cur = c.sub(cur, back)
	case k - 1:
		back = min(cost, prev)
		prev = c.sub(prev, back)
	}
	reset := c.mul(c.add(k, 1), n.win)
	if cur > 0 {
		reset = c.add(reset, n.win)
	}
	next := st
	if back > 0 {
		switch {
		case cur > 0:
			next = encodeState(n.alg, SchemaVersion, int64(n.alg), rev, eff, k, cur, prev)
		case prev > 0:
			next = encodeState(n.alg, SchemaVersion, int64(n.alg), rev, c.sub(c.mul(k, n.win), 1), k-1, prev, 0)
		default:
			next = nil
		}
	}
	weight := c.ceil(c.mul(c.sub(n.win, e), q), n.win)
	remaining := max(0, c.sub(c.sub(n.limit, c.ceil(c.mul(prev, weight), q)), cur))
	return Reply{StatusAllowed, now, eff, n.limit, remaining, back, reset}, next
}
