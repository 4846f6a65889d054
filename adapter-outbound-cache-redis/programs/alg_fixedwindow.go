package programs

import "github.com/tech-log/tech-log-backend/shared-contract/ratelimit"

// fixedWindowModel: fixed window `>B I6 I6 I7` (l, w, c): l, w <= S <
// 2^48; c <= M/2 < 2^56 (F1).
var fixedWindowModel = model{
	alg:     ratelimit.AlgorithmFixedWindow,
	slug:    "fixed-window",
	setCode: 1,
	layout:  []field{{FieldLastObserved, 6}, {FieldWindow, 6}, {FieldCount, 7}},
	args:    func(dst []any, p ratelimit.Policy) []any { return append(dst, p.WindowMillis()) },
	fill:    func(p ratelimit.Policy, n numbers) numbers { n.win = p.WindowMillis(); return n },
	validState: func(n numbers, f map[string]int64, c *calc) bool {
		return f[FieldWindow] == c.floor(f[FieldLastObserved], n.win) &&
			f[FieldCount] >= 1 && f[FieldCount] <= n.limit
	},
	decide: func(n numbers, s step) (Reply, State) {
		return n.fixedWindow(s.f, s.now, s.eff, s.units, s.rev, s.c)
	},
	charge: numbers.chargeFixedWindow,
	refund: numbers.refundFixedWindow,
	checkDecision: func(n numbers, r Reply) error {
		eff, reset := r.EffectiveNowMillis, r.ResetAtMillis
		if want := (eff/n.win + 1) * n.win; reset != want {
			return malformed("resetAt %d is not the window end %d", reset, want)
		}
		if r.Status == StatusDenied && r.RetryAfterMillis != reset-eff {
			return malformed("denied retryAfter %d, want the window end in %d", r.RetryAfterMillis, reset-eff)
		}
		return nil
	},
}

// fixedWindow: F1 bounds used + cost <= 2*limit, F2 bounds the window end
// and the TTL.
func (n numbers) fixedWindow(f map[string]int64, now, eff, cost, rev int64, c *calc) (Reply, State) {
	k := c.floor(eff, n.win)
	var used int64
	if f != nil && f[FieldWindow] == k {
		used = f[FieldCount]
	}
	reset := c.mul(c.add(k, 1), n.win)
	if c.add(used, cost) > n.limit {
		return Reply{StatusDenied, now, eff, n.limit, c.sub(n.limit, used), c.sub(reset, eff), reset}, nil
	}
	next := encodeState(n.alg, SchemaVersion, int64(n.alg), rev, eff, k, c.add(used, cost))
	return Reply{StatusAllowed, now, eff, n.limit, c.sub(c.sub(n.limit, used), cost), 0, reset}, next
}

// chargeFixedWindow adds units to the current window's count, at most the
// limit.
func (n numbers) chargeFixedWindow(s step) (Reply, State) {
	c, eff := s.c, s.eff
	k := c.floor(eff, n.win)
	var used int64
	if s.f != nil && s.f[FieldWindow] == k {
		used = s.f[FieldCount]
	}
	charged := min(c.add(used, s.units), n.limit)
	reset := c.mul(c.add(k, 1), n.win)
	next := encodeState(n.alg, SchemaVersion, int64(n.alg), s.rev, eff, k, charged)
	return Reply{StatusAllowed, s.now, eff, n.limit, c.sub(n.limit, charged), 0, reset}, next
}

// refundFixedWindow takes min(cost, count) off the count while the
// admission's window is the current one.
func (n numbers) refundFixedWindow(s step) (Reply, State) {
	c, eff := s.c, s.eff
	k := c.floor(eff, n.win)
	var used int64
	if s.f != nil && s.f[FieldWindow] == k {
		used = s.f[FieldCount]
	}
	reset := c.mul(c.add(k, 1), n.win)
	var back int64
	if used > 0 && c.floor(s.at, n.win) == k {
		back = min(s.units, used)
	}
	next := s.st
	if back > 0 {
		next = nil
		if used > back {
			next = encodeState(n.alg, SchemaVersion, int64(n.alg), s.rev, eff, k, c.sub(used, back))
		}
	}
	return Reply{StatusAllowed, s.now, eff, n.limit, c.add(c.sub(n.limit, used), back), back, reset}, next
}
