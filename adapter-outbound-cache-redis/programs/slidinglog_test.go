package programs

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// This file tests the sliding log (ADR 0024): an exact reference written
// independently of the model (the list of every admission, the window sum
// recomputed from it at each step, the retry found by trying every later
// millisecond), random traces of it against the model and the Lua
// programs, the vectors testdata/sliding-log-vectors-v1.json, which the
// reference generates (go test -run TestSlidingLogVectors -update-log), and
// the memory bound: an abusive client leaves at most limit entries.

var updateLog = flag.Bool("update-log", false, "rewrite testdata/sliding-log-vectors-v1.json from the exact reference")

// logRef is the exact reference: every admission ever made (instant and
// cost) and the effective instant of the last one (the clock-regression
// guard), absent before the first admission.
type logRef struct {
	admitted []LogEntry
	last     int64
	any      bool
}

// inWindow is the sum of the costs admitted after at - window, and the
// latest such admission (0 when there is none).
func (r *logRef) inWindow(window, at int64) (sum, newest int64) {
	for _, e := range r.admitted {
		if e.AtMillis > at-window {
			sum += e.Cost
			newest = max(newest, e.AtMillis)
		}
	}
	return sum, newest
}

// decide is one decision at server time now (ms) for a sliding log of the
// given limit, window and max clock regression; it returns the reply the
// programs must give and records an admission only.
func (r *logRef) decide(limit, window, reg, now, cost int64) Reply {
	eff := now
	if r.any && now < r.last {
		if r.last-now > reg {
			return Reply{StatusClockUnsafe, now, r.last, 0, 0, r.last - now - reg, 0}
		}
		eff = r.last
	}
	sum, newest := r.inWindow(window, eff)
	if sum+cost <= limit {
		// Admissions at or before last - reg - window can never count
		// again (every later eff is at least last - reg): forget them.
		keep := r.admitted[:0:0]
		for _, e := range r.admitted {
			if e.AtMillis > eff-reg-window {
				keep = append(keep, e)
			}
		}
		r.admitted = append(keep, LogEntry{eff, cost})
		r.last, r.any = eff, true
		return Reply{StatusAllowed, now, eff, limit, limit - sum - cost, 0, eff + window}
	}
	// The smallest wait after which the same request is admitted (nothing
	// else arriving): the window sum only falls when an admission leaves,
	// at its instant + window, so try each of those instants.
	retry := window
	for _, e := range r.admitted {
		if d := e.AtMillis + window - eff; d >= 1 && d < retry {
			if s, _ := r.inWindow(window, eff+d); s+cost <= limit {
				retry = d
			}
		}
	}
	return Reply{StatusDenied, now, eff, limit, limit - sum, retry, newest + window}
}

func logPolicy(t testing.TB, limit int64, window, reg time.Duration) ratelimit.Policy {
	t.Helper()
	return mustPolicy(t, ratelimit.AlgorithmSlidingLog, ratelimit.SlidingLog{Limit: limit, Window: window}, limit, vectorGrace, reg)
}

// logShapes are the policies of the random traces: limit 1, a few, 100
// (the bench's), windows of 1 ms to a minute, regression 0 and 5 ms.
func logShapes(t testing.TB) []ratelimit.Policy {
	return []ratelimit.Policy{
		logPolicy(t, 1, time.Second, 0),
		logPolicy(t, 5, 40*time.Millisecond, 5*time.Millisecond),
		logPolicy(t, 7, time.Millisecond, 0),
		logPolicy(t, 100, time.Second, 5*time.Millisecond),
		logPolicy(t, 12, 997*time.Millisecond, 0),
		logPolicy(t, 3, time.Minute, 5*time.Millisecond),
	}
}

// logTrace is a random trace for p: each step's time (ms, mostly forward
// by up to a tenth of the window, sometimes back within and beyond the
// regression, sometimes a whole window on) and cost (1..limit, mostly 1).
func logTrace(p ratelimit.Policy, rng *rand.Rand, start int64, n int) (times, costs []int64) {
	q := p.Params().(ratelimit.SlidingLog)
	w := q.Window.Milliseconds()
	now := start
	for range n {
		switch k := rng.IntN(20); {
		case k == 0:
			now -= rng.Int64N(8) // back up to 8 ms
		case k == 1:
			now += w * int64(rng.IntN(2)+1)
		default:
			now += rng.Int64N(w/10 + 2)
		}
		times = append(times, now)
		cost := int64(1)
		if rng.IntN(3) == 0 {
			cost = 1 + rng.Int64N(q.Limit)
		}
		costs = append(costs, cost)
	}
	return times, costs
}

// TestSlidingLogModelMatchesExactReference: on random traces of every
// shape the model's reply equals the exact reference's, only admissions
// write, and the stored log holds exactly the reference's admissions still
// in the window, oldest first, with their sum.
func TestSlidingLogModelMatchesExactReference(t *testing.T) {
	for i, p := range logShapes(t) {
		t.Run(fmt.Sprint(p.Params()), func(t *testing.T) {
			q := p.Params().(ratelimit.SlidingLog)
			w := q.Window.Milliseconds()
			rng := rand.New(rand.NewPCG(uint64(i), 24))
			times, costs := logTrace(p, rng, t0, 3000)
			var ref logRef
			var st State
			counts := map[Status]int{}
			for k, now := range times {
				want := ref.decide(q.Limit, w, p.MaxClockRegression().Milliseconds(), now, costs[k])
				var c calc
				got, next := evaluate(p, st, now, 0, costs[k], &c)
				require.False(t, c.overflow)
				require.Equal(t, want, got, "step %d at %d cost %d", k, now, costs[k])
				require.NoError(t, got.Check(p), "step %d", k)
				counts[got.Status]++
				if got.Status != StatusAllowed {
					require.Equal(t, st, next, "step %d: only an admission writes", k)
					continue
				}
				entries, err := next.LogEntries()
				require.NoError(t, err)
				var live []LogEntry
				var sum int64
				for _, e := range ref.admitted {
					if e.AtMillis > got.EffectiveNowMillis-w {
						live = append(live, e)
						sum += e.Cost
					}
				}
				require.Equal(t, live, entries, "step %d: the stored entries", k)
				require.Equal(t, sum, stateField(t, next, FieldSum), "step %d: the stored sum", k)
				require.LessOrEqual(t, int64(len(entries)), q.Limit, "step %d: at most limit entries", k)
				st = next
			}
			require.Positive(t, counts[StatusAllowed])
			require.Positive(t, counts[StatusDenied])
		})
	}
}

// TestSlidingLogRetryAfterIsHonestAndMinimal: after a denial, the same
// request at eff + retryAfter is admitted and at eff + retryAfter - 1 it is
// not (when that is still after eff).
func TestSlidingLogRetryAfterIsHonestAndMinimal(t *testing.T) {
	for i, p := range logShapes(t) {
		rng := rand.New(rand.NewPCG(uint64(i), 7))
		times, costs := logTrace(p, rng, t0, 600)
		var st State
		denials := 0
		for k, now := range times {
			r, next := Evaluate(p, st, now, costs[k])
			if r.Status == StatusDenied {
				denials++
				at := r.EffectiveNowMillis + r.RetryAfterMillis
				ok, _ := Evaluate(p, st, at, costs[k])
				require.Equal(t, StatusAllowed, ok.Status, "%v step %d: denied %+v, retried at %d", p.Params(), k, r, at)
				if r.RetryAfterMillis > 1 {
					no, _ := Evaluate(p, st, at-1, costs[k])
					require.Equal(t, StatusDenied, no.Status, "%v step %d: one ms earlier is too early", p.Params(), k)
				}
			}
			if r.Status == StatusAllowed {
				st = next
			}
		}
		require.Positive(t, denials, "%v", p.Params())
	}
}

// TestSlidingLogLuaMatchesModel runs the same random traces through the
// Lua decision and charge programs on miniredis: every reply, stored value
// and TTL equals the model's.
func TestSlidingLogLuaMatchesModel(t *testing.T) {
	for i, p := range logShapes(t) {
		t.Run(fmt.Sprint(p.Params()), func(t *testing.T) {
			t.Parallel()
			m := newMini(t)
			prog, charge := mustProgram(t, ratelimit.AlgorithmSlidingLog), mustCharge(t, ratelimit.AlgorithmSlidingLog)
			rng := rand.New(rand.NewPCG(uint64(i), 5))
			times, costs := logTrace(p, rng, t0, 400)
			var st State
			for k, now := range times {
				isCharge := rng.IntN(6) == 0
				want, next := Evaluate(p, st, now, costs[k])
				pr := prog
				if isCharge {
					want, next = Charge(p, st, now, costs[k])
					pr = charge
				}
				v, err := m.run(pr, now, "l", Args(p, costs[k])...)
				require.NoError(t, err)
				got := toReply(t, v)
				require.Equal(t, want, got, "step %d at %d cost %d charge %v", k, now, costs[k], isCharge)
				require.NoError(t, got.Check(p), "step %d", k)
				st = next
				require.Equal(t, st, getState(t, m.c, "l"), "step %d: stored value", k)
				if got.Status == StatusAllowed {
					require.Equal(t, got.ExpiryMillis(p), m.srv.TTL("l").Milliseconds(), "step %d: TTL", k)
				}
			}
		})
	}
}

// TestSlidingLogMemoryIsBoundedByTheLimit: a client sending ten times the
// limit, every millisecond for five windows, leaves a state of at most
// limit entries on the Lua program (miniredis): the value's length never
// exceeds the header, limit entries and the revision, whatever the rate.
func TestSlidingLogMemoryIsBoundedByTheLimit(t *testing.T) {
	const limit = 100
	p := logPolicy(t, limit, time.Second, 0)
	m := newMini(t)
	prog := mustProgram(t, ratelimit.AlgorithmSlidingLog)
	bound := FixedStateBytes(ratelimit.AlgorithmSlidingLog) + limit*LogEntryBytes + len(fmt.Sprint(p.Revision()))
	admitted, longest := 0, 0
	for now := t0; now < t0+5_000; now += 1 { // 1,000 per second: ten times the limit
		r := toReply(t, must(m.run(prog, now, "abuse", Args(p, 1)...)))
		if r.Status == StatusAllowed {
			admitted++
		}
		longest = max(longest, len(getState(t, m.c, "abuse")))
	}
	require.Equal(t, 5*limit, admitted, "exactly limit per window")
	require.Equal(t, bound, longest, "the log holds at most limit entries")
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestSlidingLogPrunesBeforeAppending: the entries at or before eff -
// window are dropped by the write, the ones after it kept in order.
func TestSlidingLogPrunesBeforeAppending(t *testing.T) {
	p := logPolicy(t, 10, 100*time.Millisecond, 0)
	st := encodeLog(p.Revision(), t0+50, []LogEntry{{t0, 3}, {t0 + 10, 2}, {t0 + 50, 1}})
	r, next := Evaluate(p, st, t0+110, 4)
	require.Equal(t, Reply{StatusAllowed, t0 + 110, t0 + 110, 10, 10 - 1 - 4, 0, t0 + 210}, r)
	require.Equal(t, encodeLog(p.Revision(), t0+110, []LogEntry{{t0 + 50, 1}, {t0 + 110, 4}}), next)
	// Everything left: the log restarts from its new entry.
	r, next = Evaluate(p, st, t0+150, 10)
	require.Equal(t, StatusAllowed, r.Status)
	require.Equal(t, encodeLog(p.Revision(), t0+150, []LogEntry{{t0 + 150, 10}}), next)
	// A newest entry more than a window after l (a lease's entry is at
	// its end, up to a window after: ADR 0042) is refused before the
	// clock is looked at, by the model and by the program alike.
	ahead := encodeLogRaw(p.Revision(), t0, 1, 1, []LogEntry{{t0 + p.WindowMillis() + 1, 1}})
	for _, now := range []int64{t0 + 10, t0 - 1_000} { // clock fine; clock far behind l
		r, _ = Evaluate(p, ahead, now, 1)
		require.Equal(t, Reply{Status: StatusStateIncompatible, ServerNowMillis: now}, r)
		m := newMini(t)
		seedMini(t, m, "ahead", ahead)
		require.Equal(t, r, m.eval(mustProgram(t, ratelimit.AlgorithmSlidingLog), p, now, "ahead", 1))
	}
	// A kept sum below the kept entries contradicts the header.
	bad := encodeLogRaw(p.Revision(), t0+50, 4, 3, []LogEntry{{t0, 3}, {t0 + 10, 2}, {t0 + 50, 1}})
	r, _ = Evaluate(p, bad, t0+105, 1)
	require.Equal(t, StatusStateIncompatible, r.Status)
}

func (vc logVectorCase) policy(t testing.TB) ratelimit.Policy {
	return logPolicy(t, vc.Params.Limit, time.Duration(vc.Params.WindowMillis)*time.Millisecond,
		time.Duration(vc.MaxClockRegressionMillis)*time.Millisecond)
}
