package programs

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// withDedup returns p rebuilt with a dedup window (and optionally another
// ID or revision) and the default DedupMaxReplays.
func withDedup(t testing.TB, p ratelimit.Policy, window time.Duration, id ratelimit.PolicyID, rev int64) ratelimit.Policy {
	t.Helper()
	return withDedupReplays(t, p, window, id, rev, ratelimit.DefaultDedupMaxReplays)
}

// withDedupReplays is withDedup with DedupMaxReplays maxReplays.
func withDedupReplays(t testing.TB, p ratelimit.Policy, window time.Duration, id ratelimit.PolicyID, rev, maxReplays int64) ratelimit.Policy {
	t.Helper()
	if id == "" {
		id = p.ID()
	}
	if rev == 0 {
		rev = p.Revision()
	}
	q, err := ratelimit.NewPolicy(ratelimit.PolicySpec{
		ID: id, Revision: rev, Algorithm: p.Algorithm(), Params: p.Params(), MaxCost: p.MaxCost(),
		CleanupGrace: p.CleanupGrace(), MaxClockRegression: p.MaxClockRegression(),
		FailurePolicy: ratelimit.FailClosed, DedupWindow: window, DedupMaxReplays: &maxReplays,
	})
	require.NoError(t, err)
	return q
}

// TestDedupModelReplayAndConflict: on every algorithm, a repeat of an
// admitted ID within the window answers the recorded reply and changes no
// state; another cost, policy or revision is a conflict; after the window
// the ID is evaluated (and charged) again; a denial is not recorded.
func TestDedupModelReplayAndConflict(t *testing.T) {
	const t0 = int64(1_700_000_000_000)
	for name, base := range map[string]ratelimit.Policy{
		"fixed":   smallPolicy(t, ratelimit.AlgorithmFixedWindow, time.Second),
		"sliding": smallPolicy(t, ratelimit.AlgorithmSlidingWindowCounter, time.Second),
		"token":   smallPolicy(t, ratelimit.AlgorithmTokenBucket, time.Second),
		"log":     smallPolicy(t, ratelimit.AlgorithmSlidingLog, time.Second),
	} {
		t.Run(name, func(t *testing.T) {
			p := withDedup(t, base, time.Minute, "", 0)
			r1, st1, d1 := EvaluateDedup(p, nil, nil, t0, 1, "id-1")
			require.Equal(t, StatusAllowed, r1.Status)
			require.Len(t, d1, 1)
			plain, plainSt := Evaluate(p, nil, t0, 1)
			require.Equal(t, plain, r1, "the decision is exactly the decision program's")
			require.Equal(t, plainSt, st1)

			r2, st2, d2 := EvaluateDedup(p, st1, d1, t0+10, 1, "id-1")
			want := r1
			want.Status = StatusReplayed
			require.Equal(t, want, r2, "the recorded reply, server time included")
			require.NoError(t, r2.Check(p))
			require.Equal(t, st1, st2, "a replay consumes nothing")
			require.Equal(t, strings.TrimSuffix(d1["id-1"], " 0")+" 1", d2["id-1"], "only the replay count changes")
			require.Len(t, d2, 1)

			for what, q := range map[string]ratelimit.Policy{
				"another policy":   withDedup(t, base, time.Minute, "other", 0),
				"another revision": withDedup(t, base, time.Minute, "", 2),
			} {
				r, st, d := EvaluateDedup(q, nil, d1, t0+10, 1, "id-1")
				require.Equal(t, Reply{Status: StatusDedupConflict, ServerNowMillis: t0 + 10}, r, what)
				require.NoError(t, r.Check(q))
				require.Nil(t, st, what)
				require.Equal(t, d1, d)
			}
			r, st, _ := EvaluateDedup(p, st1, d1, t0+10, 2, "id-1")
			require.Equal(t, StatusDedupConflict, r.Status, "another cost")
			require.Equal(t, st1, st)

			// After the window the ID is new again.
			later := t0 + time.Minute.Milliseconds()
			r3, _, d3 := EvaluateDedup(p, st1, d1, later, 1, "id-1")
			wantPlain, _ := Evaluate(p, st1, later, 1)
			require.Equal(t, wantPlain, r3)
			require.Len(t, d3, 1)
			require.NotEqual(t, d1["id-1"], d3["id-1"], "re-recorded")

			// Denials are not recorded; a retry of a denied ID is evaluated.
			full := st1
			var rd Reply
			d := d1
			for i := 0; i < 20; i++ {
				rd, full, d = EvaluateDedup(p, full, d, t0, p.MaxCost(), fmt.Sprintf("burn-%d", i))
				if rd.Status == StatusDenied {
					break
				}
			}
			require.Equal(t, StatusDenied, rd.Status)
			n := len(d)
			rd2, _, d4 := EvaluateDedup(p, full, d, t0, 1, "denied")
			_, _, d5 := EvaluateDedup(p, full, d4, t0, 1, "denied")
			if rd2.Status == StatusDenied {
				require.Len(t, d5, n)
			}
		})
	}
}

// TestDedupModelRefusals: no dedup window or a bad ID is INVALID, a record
// that does not parse is STATE_INCOMPATIBLE; nothing is written.
func TestDedupModelRefusals(t *testing.T) {
	const t0 = int64(1_700_000_000_000)
	base := smallPolicy(t, ratelimit.AlgorithmFixedWindow, time.Second)
	p := withDedup(t, base, time.Minute, "", 0)
	for _, id := range []string{"", "a b", strings.Repeat("a", 65), "é"} {
		r, st, d := EvaluateDedup(p, nil, nil, t0, 1, id)
		assert.Equal(t, Reply{Status: StatusInvalid, ServerNowMillis: t0}, r, "%q", id)
		assert.Nil(t, st)
		assert.Nil(t, d)
	}
	r, _, _ := EvaluateDedup(base, nil, nil, t0, 1, "id")
	assert.Equal(t, StatusInvalid, r.Status, "a policy without a dedup window")
	r, _, _ = EvaluateDedup(p, nil, nil, t0, p.Limit()+1, "id")
	assert.Equal(t, StatusInvalid, r.Status)
	r, _, _ = EvaluateDedup(p, nil, nil, ratelimit.MaxServerMillis+1, 1, "id")
	assert.Equal(t, Reply{Status: StatusClockUnsafe}, r)
	for _, bad := range []string{"", "x", "p 1 1 1 1 1 1", "p 1 1 1 1 1 1 01", "P 1 1 1 1 1 1 1", "p 1 1 1 1 1 1 1 1 1", "p  1 1 1 1 1 1 1",
		"p 1 1 1 1 1 1 1 01", "p 1 1 1 1 1 1 1 ", "p 1 1 1 1 1 1 1 -1", "p 1 1 1 1 1 1 1 1 "} {
		d := Dedup{"id": bad}
		r, st, d2 := EvaluateDedup(p, nil, d, t0, 1, "id")
		assert.Equal(t, Reply{Status: StatusStateIncompatible, ServerNowMillis: t0}, r, "%q", bad)
		assert.Nil(t, st)
		assert.Equal(t, d, d2)
	}
	// Replies 6 and 7 are malformed for a policy without dedup.
	assert.Error(t, Reply{Status: StatusDedupConflict, ServerNowMillis: t0}.Check(base))
	ok, _ := Evaluate(base, nil, t0, 1)
	ok.Status = StatusReplayed
	assert.Error(t, ok.Check(base))
	assert.NoError(t, ok.Check(p))
}

// TestDedupModelCap: the hash never holds more than the cap; recording into
// a full hash drops the expired records, or else the one expiring first
// (ties: the smallest ID).
func TestDedupModelCap(t *testing.T) {
	const t0 = int64(1_700_000_000_000)
	p := withDedup(t, mustPolicy(t, ratelimit.AlgorithmFixedWindow, ratelimit.FixedWindow{Limit: 1000, Window: time.Hour}, 1, time.Second, time.Second), time.Minute, "", 0)
	var st State
	var d Dedup
	var r Reply
	for i := 0; i < DedupMaxEntries; i++ {
		r, st, d = evaluateDedup(p, st, d, t0+int64(i/2), 1, fmt.Sprintf("id-%03d", i), DedupMaxEntries)
		require.Equal(t, StatusAllowed, r.Status)
	}
	require.Len(t, d, DedupMaxEntries)
	// Full, nothing expired: the earliest expiry goes, ties by smallest ID.
	r, st, d = evaluateDedup(p, st, d, t0+100, 1, "new-1", DedupMaxEntries)
	require.Equal(t, StatusAllowed, r.Status)
	require.Len(t, d, DedupMaxEntries)
	require.NotContains(t, d, "id-000")
	require.Contains(t, d, "id-001")
	_, st, d = evaluateDedup(p, st, d, t0+100, 1, "new-2", DedupMaxEntries)
	require.NotContains(t, d, "id-001")
	require.Contains(t, d, "id-002")
	// A repeat of a recorded ID in a full hash evicts nothing.
	_, st, d = evaluateDedup(p, st, d, t0+100, 1, "new-2", DedupMaxEntries)
	require.Len(t, d, DedupMaxEntries)
	// Once some have expired, all expired ones go at the next record.
	later := t0 + time.Minute.Milliseconds() + 3 // id-002..id-007 expired
	_, _, d = evaluateDedup(p, st, d, later, 1, "new-3", DedupMaxEntries)
	require.Len(t, d, DedupMaxEntries-6+1)
	for _, gone := range []string{"id-002", "id-007"} {
		require.NotContains(t, d, gone)
	}
	require.Contains(t, d, "id-008")
}

// TestDedupModelReplayBudget: with DedupMaxReplays n, an admitted ID is
// replayed free exactly n times within the window; every further reuse is
// charged like a request without an ID (and denied once the limit is
// spent), records nothing and leaves the spent record as it is; after the
// window the ID is recorded afresh with a new budget. On every algorithm,
// for n = 0 (every reuse charged), 1 (the default) and the maximum.
func TestDedupModelReplayBudget(t *testing.T) {
	const t0 = int64(1_700_000_000_000)
	for name, base := range map[string]ratelimit.Policy{
		"fixed":   mustPolicy(t, ratelimit.AlgorithmFixedWindow, ratelimit.FixedWindow{Limit: 5, Window: time.Hour}, 1, time.Second, time.Second),
		"sliding": mustPolicy(t, ratelimit.AlgorithmSlidingWindowCounter, ratelimit.SlidingWindowCounter{Limit: 5, Window: time.Hour}, 1, time.Second, time.Second),
		"token":   mustPolicy(t, ratelimit.AlgorithmTokenBucket, ratelimit.TokenBucket{Capacity: 5, RefillTokens: 1, RefillPeriod: time.Hour}, 1, time.Second, time.Second),
	} {
		for _, n := range []int64{0, 1, ratelimit.MaxDedupMaxReplays} {
			t.Run(fmt.Sprintf("%s %d replays", name, n), func(t *testing.T) {
				p := withDedupReplays(t, base, time.Minute, "", 0, n)
				var st State
				var d Dedup
				var r Reply
				counts := map[Status]int64{}
				// 40 uses of one ID on a limit of 5: 5 charged admissions
				// (the first recorded), n replays, the rest denied.
				var spent string
				for i := range int64(40) {
					r, st, d = EvaluateDedup(p, st, d, t0+i, 1, "one-key")
					counts[r.Status]++
					require.Len(t, d, 1, "use %d: one record", i)
					if counts[StatusAllowed]+counts[StatusReplayed] > 1+n {
						if spent == "" {
							spent = d["one-key"]
						}
						require.Equal(t, spent, d["one-key"], "use %d: a spent record is left as it is", i)
					}
				}
				require.Equal(t, int64(5), counts[StatusAllowed], "%v", counts)
				require.Equal(t, n, counts[StatusReplayed], "%v", counts)
				require.Equal(t, 35-n, counts[StatusDenied], "%v", counts)
				rec, ok := parseDedupRecord(d["one-key"])
				require.True(t, ok)
				require.Equal(t, n, rec.replays)
				require.Equal(t, t0+time.Minute.Milliseconds(), rec.expires, "recorded by the first use only")

				// After the window: recorded afresh (if admitted), with a
				// new budget; the state is spent, so here it is denied and
				// nothing is recorded.
				later := t0 + time.Minute.Milliseconds()
				r, _, d2 := EvaluateDedup(p, st, d, later, 1, "one-key")
				require.Equal(t, StatusDenied, r.Status)
				require.Equal(t, d, d2)
				// With room in the limit (a fresh state), a new record.
				r, _, d3 := EvaluateDedup(p, nil, d, later, 1, "one-key")
				require.Equal(t, StatusAllowed, r.Status)
				rec, ok = parseDedupRecord(d3["one-key"])
				require.True(t, ok)
				require.Zero(t, rec.replays)
				require.Equal(t, later+time.Minute.Milliseconds(), rec.expires)

				// Conflicts are unchanged by a spent budget.
				r, _, _ = EvaluateDedup(p, st, d, t0+50, 2, "one-key")
				require.Equal(t, StatusDedupConflict, r.Status, "another cost")
				r, _, _ = EvaluateDedup(withDedupReplays(t, base, time.Minute, "other", 0, n), nil, d, t0+50, 1, "one-key")
				require.Equal(t, StatusDedupConflict, r.Status, "another policy")
			})
		}
	}
}

// TestDedupModelReadsV1Records: a record written by the v1 programs (no
// replay count) reads as replays 0: replayed while the budget lasts and
// rewritten with the count.
func TestDedupModelReadsV1Records(t *testing.T) {
	const t0 = int64(1_700_000_000_000)
	p := withDedup(t, smallPolicy(t, ratelimit.AlgorithmFixedWindow, time.Second), time.Minute, "", 0)
	v1 := Dedup{"id": "programs-test 7 1 1700000060000 1700000000000 1700000000000 4 1700000001000"}
	r, st, d := EvaluateDedup(p, nil, v1, t0+10, 1, "id")
	require.Equal(t, Reply{StatusReplayed, t0, t0, p.Limit(), 4, 0, 1700000001000}, r)
	require.Nil(t, st)
	require.Equal(t, Dedup{"id": v1["id"] + " 1"}, d)
	r, _, d2 := EvaluateDedup(p, nil, d, t0+20, 1, "id")
	require.Equal(t, StatusAllowed, r.Status, "spent: charged")
	require.Equal(t, d, d2)
}
