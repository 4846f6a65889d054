package programs

import "github.com/tech-log/tech-log-backend/shared-contract/ratelimit"

// tokenBucketModel: token bucket `>B I6 I7 I6` (l, t, m): l <= S < 2^48;
// t < C <= M < 2^56; m < P <= H < 2^48 (T1).
var tokenBucketModel = model{
	alg:     ratelimit.AlgorithmTokenBucket,
	slug:    "token-bucket",
	setCode: 3,
	layout:  []field{{FieldLastObserved, 6}, {FieldTokens, 7}, {FieldRemainder, 6}},
	args: func(dst []any, p ratelimit.Policy) []any {
		tokens, period, _ := p.Refill()
		return append(dst, tokens, period)
	},
	fill: func(p ratelimit.Policy, n numbers) numbers {
		n.rate, n.per, _ = p.Refill()
		n.fullScaled = n.limit * n.per // T1
		return n
	},
	validState: func(n numbers, f map[string]int64, _ *calc) bool {
		return f[FieldTokens] < n.limit && f[FieldRemainder] < n.per
	},
	decide: func(n numbers, s step) (Reply, State) {
		return n.tokenBucket(s.f, s.now, s.eff, s.units, s.rev, s.c)
	},
	charge: numbers.chargeTokenBucket,
	refund: numbers.refundTokenBucket,
}

// level is the bucket's scaled level at eff, refilled since l: full when
// absent or when the refill reaches full (T1 bounds every scaled level by
// capacity*period).
func (n numbers) level(f map[string]int64, eff int64, c *calc) (s, full int64) {
	full = c.mul(n.limit, n.per)
	s = full
	if f != nil {
		s = c.add(c.mul(f[FieldTokens], n.per), f[FieldRemainder])
		elapsed := c.sub(eff, f[FieldLastObserved])
		if elapsed >= c.ceil(c.sub(full, s), n.rate) {
			s = full
		} else {
			s = c.add(s, c.mul(elapsed, n.rate))
		}
	}
	return s, full
}

// tokenBucket: T1 bounds every scaled level by capacity*period, T2 the reset
// instant and the TTL.
func (n numbers) tokenBucket(f map[string]int64, now, eff, cost, rev int64, c *calc) (Reply, State) {
	s, full := n.level(f, eff, c)
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

// chargeTokenBucket takes units from the refilled level, at least 0.
func (n numbers) chargeTokenBucket(s step) (Reply, State) {
	c, eff := s.c, s.eff
	level, full := n.level(s.f, eff, c)
	after := max(0, c.sub(level, c.mul(s.units, n.per)))
	tokens := c.floor(after, n.per)
	reset := c.add(eff, c.ceil(c.sub(full, after), n.rate))
	next := encodeState(n.alg, SchemaVersion, int64(n.alg), s.rev, eff, tokens, c.sub(after, c.mul(tokens, n.per)))
	return Reply{StatusAllowed, s.now, eff, n.limit, tokens, 0, reset}, next
}

// refundTokenBucket adds cost tokens to the refilled level, at most up to
// a full bucket; a full bucket is deleted.
func (n numbers) refundTokenBucket(s step) (Reply, State) {
	c, eff := s.c, s.eff
	level, full := n.level(s.f, eff, c)
	back := min(c.sub(full, level), c.mul(s.units, n.per))
	after := c.add(level, back)
	tokens := c.floor(after, n.per)
	reset := c.add(eff, c.ceil(c.sub(full, after), n.rate))
	next := s.st
	if back > 0 {
		next = nil
		if after < full {
			next = encodeState(n.alg, SchemaVersion, int64(n.alg), s.rev, eff, tokens, c.sub(after, c.mul(tokens, n.per)))
		}
	}
	return Reply{StatusAllowed, s.now, eff, n.limit, tokens, c.ceil(back, n.per), reset}, next
}
