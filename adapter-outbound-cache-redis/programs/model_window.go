package programs

import "github.com/tech-log/tech-log-backend/shared-contract/ratelimit"

// The window family of the model: the fixed window, the sliding-window
// counter and the sliding log, each bounded by its window.

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
