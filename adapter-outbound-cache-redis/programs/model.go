package programs

import (
	"math/bits"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// Evaluate is the reference model: what the program for p answers, and the
// state it leaves, when it runs on a key holding st while the server's TIME
// reads serverNowMillis, for one request of the given cost. It performs the
// programs' integer arithmetic step for step (docs/programs.md), so the
// programs are tested against it. The returned State is st itself unless the
// reply is StatusAllowed; the TTL then set is Reply.ExpiryMillis.
//
// serverNowMillis outside 0..MaxServerMillis is StatusClockUnsafe, as a TIME
// past MaxServerMillis is. The zero Policy is StatusInvalid.
//
// The server's TIME is taken at the start of that millisecond (0 µs); GCRA,
// the one algorithm that reads microseconds, is modelled at any microsecond
// by EvaluateMicros.
func Evaluate(p ratelimit.Policy, st State, serverNowMillis, cost int64) (Reply, State) {
	var c calc
	r, next := evaluate(p, st, serverNowMillis, 0, cost, &c)
	return r, next
}

// EvaluateMicros is Evaluate with the server's TIME at serverNowMicros
// microseconds: the reply's instants are its millisecond
// (floor(serverNowMicros / 1000)), and GCRA decides at the microsecond
// (ADR 0021). For the other algorithms it equals Evaluate at that
// millisecond.
func EvaluateMicros(p ratelimit.Policy, st State, serverNowMicros, cost int64) (Reply, State) {
	var c calc
	ms, frac := splitMicros(serverNowMicros)
	return evaluate(p, st, ms, frac, cost, &c)
}

// splitMicros splits a microsecond instant into its millisecond (rounded
// down) and the microseconds into it, 0..999.
func splitMicros(us int64) (ms, frac int64) {
	ms, frac = us/1000, us%1000
	if frac < 0 {
		ms, frac = ms-1, frac+1000
	}
	return ms, frac
}

// calc performs the model's arithmetic and records the largest magnitude of
// any intermediate, so that tests can show every one stays within
// MaxExactInt, where the programs' doubles are exact.
type calc struct {
	peak     int64
	overflow bool
}

func (c *calc) note(x int64) int64 {
	m := x
	if m < 0 {
		m = -m
	}
	if m > ratelimit.MaxExactInt || m < 0 {
		c.overflow = true
	}
	if m > c.peak {
		c.peak = m
	}
	return x
}

// mul multiplies a, b >= 0.
func (c *calc) mul(a, b int64) int64 {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi != 0 || lo > uint64(ratelimit.MaxExactInt) {
		c.overflow = true
	}
	return c.note(int64(lo))
}

func (c *calc) add(a, b int64) int64 { return c.note(a + b) }
func (c *calc) sub(a, b int64) int64 { return c.note(a - b) }

// floor is math.floor(a / b) for a >= 0, b >= 1.
func (c *calc) floor(a, b int64) int64 { return c.note(a / b) }

// ceil mirrors the programs' ceil(): quotient, then remainder a - q*b.
func (c *calc) ceil(a, b int64) int64 {
	q := c.floor(a, b)
	if c.sub(a, c.mul(q, b)) > 0 {
		q = c.add(q, 1)
	}
	return q
}

func fail(s Status, now int64) Reply { return Reply{Status: s, ServerNowMillis: now} }

// admit is the part every program shares before it touches state: the
// server clock within 0..MaxServerMillis, units in 1..limit, stored state
// of this policy's algorithm and revision, and a clock regression within
// the tolerance (the effective time is then the last observed one). When
// refused is true, refusal is the reply and the state stays as it was.
func admit(p ratelimit.Policy, st State, now, units int64, c *calc) (n numbers, f map[string]int64, eff int64, refusal Reply, refused bool) {
	future := now < 0 || now > ratelimit.MaxServerMillis
	if future {
		now = 0
	}
	if p.IsZero() || units < 1 || units > p.Limit() {
		return n, nil, 0, fail(StatusInvalid, now), true
	}
	if future {
		return n, nil, 0, Reply{Status: StatusClockUnsafe}, true
	}
	n = numbersOf(p)
	if st != nil {
		var ok bool
		if f, ok = st.fields(n.alg); !ok || !n.validState(f, p.Revision(), c) || !st.logNewestValid(f) {
			return n, nil, 0, fail(StatusStateIncompatible, now), true
		}
	}
	eff = now
	if f != nil && now < f[FieldLastObserved] {
		last := f[FieldLastObserved]
		if c.sub(last, now) > n.reg {
			return n, nil, 0, Reply{Status: StatusClockUnsafe, ServerNowMillis: now, EffectiveNowMillis: last,
				RetryAfterMillis: c.sub(c.sub(last, now), n.reg)}, true
		}
		eff = last
	}
	return n, f, eff, Reply{}, false
}

func evaluate(p ratelimit.Policy, st State, now, frac, cost int64, c *calc) (Reply, State) {
	n, f, eff, refusal, refused := admit(p, st, now, cost, c)
	if refused {
		return refusal, st
	}
	var r Reply
	var next State
	switch n.alg {
	case ratelimit.AlgorithmFixedWindow:
		r, next = n.fixedWindow(f, now, eff, cost, p.Revision(), c)
	case ratelimit.AlgorithmSlidingWindowCounter:
		r, next = n.slidingCounter(f, now, eff, cost, p.Revision(), c)
	case ratelimit.AlgorithmGCRA, ratelimit.AlgorithmLeakyBucket:
		r, next = n.gcra(f, now, eff, gcraFrac(now, eff, frac), cost, p.Revision(), false, c)
	case ratelimit.AlgorithmSlidingLog:
		r, next = n.slidingLog(st, f, now, eff, cost, p.Revision(), false, c)
	default:
		r, next = n.tokenBucket(f, now, eff, cost, p.Revision(), c)
	}
	if next == nil {
		return r, st
	}
	// The TTL the program sets: (resetAt - serverNow) + grace.
	c.add(c.sub(r.ResetAtMillis, now), n.grace)
	return r, next
}

// validState mirrors the programs' state checks: schema, algorithm,
// revision, lastObserved within MaxServerMillis and each algorithm field in
// its range.
func (n numbers) validState(f map[string]int64, rev int64, c *calc) bool {
	if f[FieldSchema] != SchemaVersion || f[FieldAlgorithm] != int64(n.alg) || f[FieldRevision] != rev ||
		f[FieldLastObserved] > ratelimit.MaxServerMillis {
		return false
	}
	switch n.alg {
	case ratelimit.AlgorithmFixedWindow:
		return f[FieldWindow] == c.floor(f[FieldLastObserved], n.win) &&
			f[FieldCount] >= 1 && f[FieldCount] <= n.limit
	case ratelimit.AlgorithmSlidingWindowCounter:
		return f[FieldWindow] == c.floor(f[FieldLastObserved], n.win) &&
			f[FieldCount] >= 1 && f[FieldCount] <= n.limit && f[FieldPrevious] <= n.limit
	case ratelimit.AlgorithmGCRA, ratelimit.AlgorithmLeakyBucket:
		return f[FieldArrival] <= c.add(n.fullScaled, c.mul(999, n.rate))
	case ratelimit.AlgorithmSlidingLog:
		// The header's ranges here; the newest entry's instant (at most l)
		// in slidingLog, which reads the entries.
		return f[FieldEntries] >= 1 && f[FieldEntries] <= f[FieldSum] && f[FieldSum] <= n.limit
	default:
		return f[FieldTokens] < n.limit && f[FieldRemainder] < n.per
	}
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

// logNewestValid mirrors the programs' last read check of a sliding log,
// before the clock check: its newest entry is not after l. It is true for
// the other algorithms.
func (st State) logNewestValid(f map[string]int64) bool {
	if f[FieldAlgorithm] != int64(ratelimit.AlgorithmSlidingLog) {
		return true
	}
	entries := st.logEntries(f[FieldEntries])
	return entries[len(entries)-1].AtMillis <= f[FieldLastObserved]
}

// slidingLog decides (or, with charge, charges) one request on the sliding
// log st (ADR 0024): prune the entries at or before eff - window from the
// front, keeping the sum (L1 bounds every sum by 2*limit), then admit iff
// the kept sum plus cost is at most the limit, appending one entry; a
// denial's retry is the instant the oldest entries whose costs cover the
// excess have left. L2 bounds the reset instant (newest entry + window)
// and the TTL. A state whose entries contradict its header (newest entry
// after l, a kept sum below the kept entries, a scan that runs out) is
// StatusStateIncompatible, as in the programs (the first in admit,
// before the clock check).
func (n numbers) slidingLog(st State, f map[string]int64, now, eff, cost, rev int64, charge bool, c *calc) (Reply, State) {
	var entries []LogEntry
	var sum, newest int64
	first := 0
	if f != nil {
		entries = st.logEntries(f[FieldEntries])
		newest = entries[len(entries)-1].AtMillis // <= l: admit checked it
		cut := c.sub(eff, n.win)
		first = len(entries)
		if newest > cut {
			first, sum = 0, f[FieldSum]
			for entries[first].AtMillis <= cut {
				sum = c.sub(sum, entries[first].Cost)
				first++
			}
			if sum < int64(len(entries)-first) {
				return fail(StatusStateIncompatible, now), nil
			}
		}
	}
	kept := append([]LogEntry(nil), entries[first:]...)
	if !charge {
		if c.add(sum, cost) > n.limit {
			need := c.sub(c.add(sum, cost), n.limit)
			var freed int64
			for i := first; ; i++ {
				if i >= len(entries) {
					return fail(StatusStateIncompatible, now), nil
				}
				freed = c.add(freed, entries[i].Cost)
				if freed >= need {
					retry := c.sub(c.add(entries[i].AtMillis, n.win), eff)
					return Reply{StatusDenied, now, eff, n.limit, c.sub(n.limit, sum), retry, c.add(newest, n.win)}, nil
				}
			}
		}
		kept = append(kept, LogEntry{eff, cost})
		next := encodeLogRaw(rev, eff, c.add(sum, cost), int64(len(kept)), kept)
		return Reply{StatusAllowed, now, eff, n.limit, c.sub(c.sub(n.limit, sum), cost), 0, c.add(eff, n.win)}, next
	}
	charged := min(cost, c.sub(n.limit, sum))
	reset := c.add(eff, n.win)
	if charged > 0 {
		kept = append(kept, LogEntry{eff, charged})
	} else {
		reset = c.add(newest, n.win)
	}
	next := encodeLogRaw(rev, eff, c.add(sum, charged), int64(len(kept)), kept)
	return Reply{StatusAllowed, now, eff, n.limit, c.sub(c.sub(n.limit, sum), charged), 0, reset}, next
}
