package programs

import "github.com/tech-log/tech-log-backend/shared-contract/ratelimit"

// slidingLogModel: sliding log `>B I6 I2 I2` (l, s, n), then its n
// entries of LogEntryBytes before the revision: n <= s <= limit <=
// MaxSlidingLogLimit < 2^16 (L1), each entry's millisecond <= S < 2^48 and
// cost <= limit < 2^16.
var slidingLogModel = model{
	alg:        ratelimit.AlgorithmSlidingLog,
	slug:       "sliding-log",
	setCode:    5,
	layout:     []field{{FieldLastObserved, 6}, {FieldSum, 2}, {FieldEntries, 2}},
	args:       func(dst []any, p ratelimit.Policy) []any { return append(dst, p.WindowMillis()) },
	fill:       func(p ratelimit.Policy, n numbers) numbers { n.win = p.WindowMillis(); return n },
	logEntries: true,
	// The header's ranges here; the newest entry's instant (at most l) in
	// logNewestValid and slidingLog, which read the entries.
	validState: func(n numbers, f map[string]int64, _ *calc) bool {
		return f[FieldEntries] >= 1 && f[FieldEntries] <= f[FieldSum] && f[FieldSum] <= n.limit
	},
	decide: func(n numbers, s step) (Reply, State) {
		return n.slidingLog(s.st, s.f, s.now, s.eff, s.units, s.rev, false, s.c)
	},
	charge: func(n numbers, s step) (Reply, State) {
		return n.slidingLog(s.st, s.f, s.now, s.eff, s.units, s.rev, true, s.c)
	},
	refund: func(n numbers, s step) (Reply, State) {
		return n.refundSlidingLog(s.st, s.f, s.now, s.eff, s.units, s.at, s.rev, s.c)
	},
	checkDecision: func(n numbers, r Reply) error {
		// An admission's entry leaves one window after eff (a full log's
		// charge appends none: its newest entry is earlier); a lease's
		// entry (ADR 0042) is up to the lease's TTL later.
		eff, reset := r.EffectiveNowMillis, r.ResetAtMillis
		if r.Status == StatusAllowed && (reset < eff+n.win || reset > eff+n.win+n.leaseMs) && r.Remaining != 0 {
			return malformed("allowed resetAt %d, want effectiveNow + window %d (a lease: up to %d ms later)", reset, eff+n.win, n.leaseMs)
		}
		return nil
	},
}

// logNewestValid mirrors the programs' last read check of a sliding log,
// before the clock check: its newest entry is not after l. It is true for
// the other algorithms.
func (st State) logNewestValid(f map[string]int64) bool {
	if m := modelOf(ratelimit.Algorithm(f[FieldAlgorithm])); m == nil || !m.logEntries {
		return true
	}
	// A lease's entry (ADR 0042) is at its end, up to a window after l;
	// the model does not cover leases and refuses it, the programs accept
	// it (docs/programs.md, "Lease programs"); one more than a window
	// after l both refuse.
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
		next := encodeLogOf(n.alg, rev, eff, c.add(sum, cost), int64(len(kept)), kept)
		return Reply{StatusAllowed, now, eff, n.limit, c.sub(c.sub(n.limit, sum), cost), 0, c.add(eff, n.win)}, next
	}
	charged := min(cost, c.sub(n.limit, sum))
	reset := c.add(eff, n.win)
	if charged > 0 {
		kept = append(kept, LogEntry{eff, charged})
	} else {
		reset = c.add(newest, n.win)
	}
	next := encodeLogOf(n.alg, rev, eff, c.add(sum, charged), int64(len(kept)), kept)
	return Reply{StatusAllowed, now, eff, n.limit, c.sub(c.sub(n.limit, sum), charged), 0, reset}, next
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
	next := encodeLogOf(n.alg, rev, eff, sum, int64(len(kept)), kept)
	return Reply{StatusAllowed, now, eff, n.limit, c.sub(n.limit, sum), cost, reset}, next
}
