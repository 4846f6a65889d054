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
	rev := p.Revision()
	var r Reply
	next := st
	switch n.alg {
	case ratelimit.AlgorithmFixedWindow:
		k := c.floor(eff, n.win)
		var used int64
		if f != nil && f[FieldWindow] == k {
			used = f[FieldCount]
		}
		reset := c.mul(c.add(k, 1), n.win)
		var back int64
		if used > 0 && c.floor(at, n.win) == k {
			back = min(cost, used)
		}
		if back > 0 {
			next = nil
			if used > back {
				next = encodeState(n.alg, SchemaVersion, int64(n.alg), rev, eff, k, c.sub(used, back))
			}
		}
		r = Reply{StatusAllowed, now, eff, n.limit, c.add(c.sub(n.limit, used), back), back, reset}
	case ratelimit.AlgorithmSlidingWindowCounter:
		r, next = n.refundSlidingCounter(st, f, now, eff, cost, at, rev, c)
	case ratelimit.AlgorithmTokenBucket:
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
		back := min(c.sub(full, s), c.mul(cost, n.per))
		after := c.add(s, back)
		tokens := c.floor(after, n.per)
		reset := c.add(eff, c.ceil(c.sub(full, after), n.rate))
		if back > 0 {
			next = nil
			if after < full {
				next = encodeState(n.alg, SchemaVersion, int64(n.alg), rev, eff, tokens, c.sub(after, c.mul(tokens, n.per)))
			}
		}
		r = Reply{StatusAllowed, now, eff, n.limit, tokens, c.ceil(back, n.per), reset}
	case ratelimit.AlgorithmGCRA, ratelimit.AlgorithmLeakyBucket:
		fr := gcraFrac(now, eff, frac)
		bp := n.fullScaled
		d := n.gcraOffset(f, eff, fr, c)
		back := min(c.mul(cost, n.per), d)
		after := c.sub(d, back)
		var left int64
		if after < bp {
			left = c.floor(c.sub(bp, after), n.per)
		}
		reset := c.add(eff, c.ceil(c.ceil(c.add(c.mul(fr, n.rate), after), n.rate), 1000))
		if back > 0 {
			next = nil
			if after > 0 {
				next = encodeState(n.alg, SchemaVersion, int64(n.alg), rev, eff, c.add(after, c.mul(fr, n.rate)))
			}
		}
		r = Reply{StatusAllowed, now, eff, n.limit, left, c.ceil(back, n.per), reset}
	case ratelimit.AlgorithmSlidingLog:
		r, next = n.refundSlidingLog(st, f, now, eff, cost, at, rev, c)
	}
	if r.Status == StatusAllowed && next != nil && !sameState(next, st) {
		c.add(c.sub(r.ResetAtMillis, now), n.grace)
	}
	return r, next
}

func sameState(a, b State) bool { return string(a) == string(b) && (a == nil) == (b == nil) }

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

// refundSlidingLog prunes as the decision does and removes the newest kept
// entry (at, cost), if there is one.
func (n numbers) refundSlidingLog(st State, f map[string]int64, now, eff, cost, at, rev int64, c *calc) (Reply, State) {
	var entries []LogEntry
	var sum, newest int64
	first := 0
	if f != nil {
		entries = st.logEntries(f[FieldEntries])
		newest = entries[len(entries)-1].AtMillis
		cut := c.sub(eff, n.win)
		first = len(entries)
		if newest > cut {
			first, sum = 0, f[FieldSum]
			for entries[first].AtMillis <= cut {
				sum = c.sub(sum, entries[first].Cost)
				first++
			}
			if sum < int64(len(entries)-first) {
				return fail(StatusStateIncompatible, now), st
			}
		}
	}
	idx := -1
	for i := len(entries) - 1; i >= first; i-- {
		if entries[i].AtMillis < at {
			break
		}
		if entries[i].AtMillis == at && entries[i].Cost == cost {
			idx = i
			break
		}
	}
	reset := eff
	if first < len(entries) {
		reset = c.add(newest, n.win)
	}
	if idx < 0 {
		return Reply{StatusAllowed, now, eff, n.limit, c.sub(n.limit, sum), 0, reset}, st
	}
	sum = c.sub(sum, cost)
	kept := append(append([]LogEntry(nil), entries[first:idx]...), entries[idx+1:]...)
	if len(kept) == 0 {
		return Reply{StatusAllowed, now, eff, n.limit, c.sub(n.limit, sum), cost, eff}, nil
	}
	reset = c.add(kept[len(kept)-1].AtMillis, n.win)
	next := encodeLogRaw(rev, eff, sum, int64(len(kept)), kept)
	return Reply{StatusAllowed, now, eff, n.limit, c.sub(n.limit, sum), cost, reset}, next
}
