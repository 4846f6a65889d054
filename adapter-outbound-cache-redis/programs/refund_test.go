package programs

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

func mustRefund(t testing.TB, a ratelimit.Algorithm) Program {
	t.Helper()
	p, ok := RefundFor(a)
	require.True(t, ok, "refund program for %v (manifest: %v)", a, Verify())
	return p
}

// refundPolicies are the model and miniredis refund policies: each
// algorithm's small policy and one with a larger limit and cost.
func refundPolicies(t testing.TB) map[string]ratelimit.Policy {
	ms := func(n int64) time.Duration { return time.Duration(n) * time.Millisecond }
	out := map[string]ratelimit.Policy{
		"fixed 40/300ms":   mustPolicy(t, ratelimit.AlgorithmFixedWindow, ratelimit.FixedWindow{Limit: 40, Window: ms(300)}, 9, time.Second, ms(50)),
		"sliding 30/700ms": mustPolicy(t, ratelimit.AlgorithmSlidingWindowCounter, ratelimit.SlidingWindowCounter{Limit: 30, Window: ms(700)}, 8, time.Second, ms(50)),
		"token 20, 7/900ms": mustPolicy(t, ratelimit.AlgorithmTokenBucket,
			ratelimit.TokenBucket{Capacity: 20, RefillTokens: 7, RefillPeriod: ms(900)}, 6, time.Second, ms(50)),
		"gcra 7/3s burst 12":   mustPolicy(t, ratelimit.AlgorithmGCRA, ratelimit.GCRA{Rate: 7, Period: 3 * time.Second, Burst: 12}, 5, time.Second, ms(50)),
		"log 25/800ms":         mustPolicy(t, ratelimit.AlgorithmSlidingLog, ratelimit.SlidingLog{Limit: 25, Window: ms(800)}, 6, time.Second, ms(50)),
		"concurrency 25/800ms": mustPolicy(t, ratelimit.AlgorithmConcurrency, ratelimit.Concurrency{Limit: 25, MaxHold: ms(800)}, 6, time.Second, ms(50)),
	}
	for _, a := range algorithms {
		out["small "+a.String()] = smallPolicy(t, a, ms(50))
	}
	return out
}

// TestRefundProgramsInManifest: one refund program per algorithm, in the
// manifest, with the decision program's argument count plus the receipt,
// and among neither the decision nor the charge programs.
func TestRefundProgramsInManifest(t *testing.T) {
	require.NoError(t, Verify())
	for _, alg := range algorithms {
		rf := mustRefund(t, alg)
		dec := mustProgram(t, alg)
		assert.Equal(t, dec.ArgCount+ArgCountRefund, rf.ArgCount)
		assert.Equal(t, NumKeys, rf.NumKeys)
		assert.Equal(t, "rate-"+map[ratelimit.Algorithm]string{
			ratelimit.AlgorithmFixedWindow: "fixed-window", ratelimit.AlgorithmSlidingWindowCounter: "sliding-counter",
			ratelimit.AlgorithmTokenBucket: "token-bucket", ratelimit.AlgorithmGCRA: "gcra", ratelimit.AlgorithmSlidingLog: "sliding-log",
			ratelimit.AlgorithmLeakyBucket: "leaky-bucket", ratelimit.AlgorithmConcurrency: "concurrency",
		}[alg]+"-refund-v1", rf.Name)
		for _, other := range append(All(), Charges()...) {
			assert.NotEqual(t, other.SHA1, rf.SHA1)
		}
	}
	assert.Len(t, All(), len(algorithms), "decision programs only")
	assert.Len(t, Charges(), len(algorithms), "charge programs only")
	assert.Nil(t, RefundArgs(ratelimit.Policy{}, 1, 1))
}

// TestRefundUndoesAdmission is exactness: on random traces, an admission
// refunded at the same microsecond leaves a state that answers every
// decision (each cost, at that instant and later) exactly as the state
// before the admission did, and the refund reports the admission's cost as
// given back.
func TestRefundUndoesAdmission(t *testing.T) {
	for name, p := range refundPolicies(t) {
		t.Run(name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(23, uint64(len(name))))
			us := t0*1000 + rng.Int64N(1000)
			var st State
			undone := 0
			for step := range 400 {
				us += rng.Int64N(150_000)
				cost := 1 + rng.Int64N(p.MaxCost())
				r, next := EvaluateMicros(p, st, us, cost)
				require.NotEqual(t, StatusStateIncompatible, r.Status)
				if r.Status == StatusAllowed && rng.IntN(2) == 0 {
					rr, back := RefundMicros(p, next, us, cost, r.EffectiveNowMillis)
					require.Equal(t, StatusAllowed, rr.Status, "step %d", step)
					if p.Algorithm() == ratelimit.AlgorithmFixedWindow || p.Algorithm() == ratelimit.AlgorithmSlidingWindowCounter ||
						p.Algorithm() == ratelimit.AlgorithmSlidingLog || p.Algorithm() == ratelimit.AlgorithmConcurrency {
						require.Equal(t, cost, rr.RetryAfterMillis, "step %d: units given back", step)
					} else {
						require.Positive(t, rr.RetryAfterMillis, "step %d: units given back", step)
					}
					for _, later := range []int64{0, 1, 999, 37_000, 400_000, 2_000_000} {
						for c := int64(1); c <= p.MaxCost(); c++ {
							a, _ := EvaluateMicros(p, st, us+later, c)
							b, _ := EvaluateMicros(p, back, us+later, c)
							require.Equal(t, a, b, "step %d: decision of %d %d µs later", step, c, later)
						}
					}
					undone++
					continue // the admission is undone: st stays
				}
				st = next
			}
			require.Positive(t, undone)
		})
	}
}

// TestRefundSaturates is each algorithm's saturation rule (issue 23): a
// refund gives back at most what the state holds, a stale receipt is a
// no-op (StatusAllowed, nothing given back, the state unchanged), and no
// refund leaves a state that admits more than a fresh one.
func TestRefundSaturates(t *testing.T) {
	now := t0
	t.Run("fixed window: after the window rolled a no-op", func(t *testing.T) {
		p := smallPolicy(t, ratelimit.AlgorithmFixedWindow, 0)
		r, st := Evaluate(p, nil, now, 3)
		require.Equal(t, StatusAllowed, r.Status)
		_, st = Evaluate(p, st, now+1000, 2) // the next window
		rr, after := Refund(p, st, now+1000, 3, r.EffectiveNowMillis)
		assert.Equal(t, Reply{StatusAllowed, now + 1000, now + 1000, 5, 3, 0, r.ResetAtMillis + 1000}, rr)
		assert.Equal(t, st, after, "nothing written")
		// In its own window: at most the count, then the key is gone.
		_, st = Evaluate(p, nil, now, 2)
		rr, after = Refund(p, st, now+5, 4, now)
		assert.Equal(t, int64(2), rr.RetryAfterMillis)
		assert.Equal(t, int64(5), rr.Remaining)
		assert.Nil(t, after, "an empty window is deleted")
	})
	t.Run("sliding counter: current and previous window, older a no-op", func(t *testing.T) {
		p := smallPolicy(t, ratelimit.AlgorithmSlidingWindowCounter, 0)
		_, st := Evaluate(p, nil, now, 3)
		_, st = Evaluate(p, st, now+1000, 1)
		rr, after := Refund(p, st, now+1000, 2, now) // the previous window's
		assert.Equal(t, int64(2), rr.RetryAfterMillis)
		f, ok := after.fields(ratelimit.AlgorithmSlidingWindowCounter)
		require.True(t, ok)
		assert.Equal(t, int64(1), f[FieldPrevious])
		assert.Equal(t, int64(1), f[FieldCount])
		rr, after = Refund(p, after, now+1000, 1, now+1000) // the current one's: only prev left
		assert.Equal(t, int64(1), rr.RetryAfterMillis)
		f, ok = after.fields(ratelimit.AlgorithmSlidingWindowCounter)
		require.True(t, ok)
		assert.Equal(t, now+1000-now%1000-1, f[FieldLastObserved], "written as of the previous window's last ms")
		assert.Equal(t, int64(1), f[FieldCount])
		rr, same := Refund(p, after, now+2000, 1, now) // two windows back
		assert.Zero(t, rr.RetryAfterMillis)
		assert.Equal(t, after, same)
	})
	t.Run("token bucket: never beyond capacity", func(t *testing.T) {
		p := smallPolicy(t, ratelimit.AlgorithmTokenBucket, 0)
		rr, after := Refund(p, nil, now, 5, now)
		assert.Equal(t, Reply{StatusAllowed, now, now, 5, 5, 0, now}, rr, "a full bucket: nothing to give back")
		assert.Nil(t, after)
		r, st := Evaluate(p, nil, now, 2)
		require.Equal(t, int64(3), r.Remaining)
		rr, after = Refund(p, st, now+100, 5, now) // 0.3 tokens refilled
		assert.Equal(t, int64(2), rr.RetryAfterMillis, "1.7 tokens given back, rounded up")
		assert.Equal(t, int64(5), rr.Remaining)
		assert.Nil(t, after, "full again: deleted")
	})
	t.Run("gcra: back by the cost's emission interval, never before now", func(t *testing.T) {
		p := smallPolicy(t, ratelimit.AlgorithmGCRA, 0)
		_, st := Evaluate(p, nil, now, 4)
		_, one := Evaluate(p, nil, now, 1)
		rr, after := Refund(p, st, now, 3, now)
		assert.Equal(t, int64(3), rr.RetryAfterMillis)
		assert.Equal(t, one, after, "four admitted, three refunded: one admitted")
		rr, after = Refund(p, after, now, 5, now)
		assert.Equal(t, int64(1), rr.RetryAfterMillis, "at most back to now")
		assert.Nil(t, after)
		rr, same := Refund(p, one, now+2000, 1, now) // TAT already past
		assert.Zero(t, rr.RetryAfterMillis)
		assert.Equal(t, one, same)
	})
	t.Run("sliding log: removes that entry", func(t *testing.T) {
		p := smallPolicy(t, ratelimit.AlgorithmSlidingLog, 0)
		_, st := Evaluate(p, nil, now, 2)
		_, st = Evaluate(p, st, now+10, 1)
		_, want := Evaluate(p, nil, now+10, 1)
		rr, after := Refund(p, st, now+10, 2, now)
		assert.Equal(t, Reply{StatusAllowed, now + 10, now + 10, 5, 4, 2, now + 1010}, rr)
		f, ok := after.fields(ratelimit.AlgorithmSlidingLog)
		require.True(t, ok)
		assert.Equal(t, []LogEntry{{now + 10, 1}}, after.logEntries(f[FieldEntries]))
		assert.Equal(t, want, after)
		for _, receipt := range [][2]int64{{now, 2}, {now + 10, 2}, {now + 5, 1}} {
			rr, same := Refund(p, after, now+10, receipt[1], receipt[0])
			assert.Zero(t, rr.RetryAfterMillis, "no entry (%d, %d)", receipt[0], receipt[1])
			assert.Equal(t, after, same)
		}
		rr, gone := Refund(p, after, now+10, 1, now+10)
		assert.Equal(t, int64(1), rr.RetryAfterMillis)
		assert.Nil(t, gone)
	})
	t.Run("any algorithm: refunds never admit more than a fresh state", func(t *testing.T) {
		for name, p := range refundPolicies(t) {
			rng := rand.New(rand.NewPCG(5, uint64(len(name))))
			var st State
			var receipts [][2]int64
			ms := now
			for range 300 {
				ms += rng.Int64N(200)
				cost := 1 + rng.Int64N(p.MaxCost())
				if rng.IntN(2) == 0 || len(receipts) == 0 {
					r, next := Evaluate(p, st, ms, cost)
					if r.Status == StatusAllowed {
						receipts = append(receipts, [2]int64{r.EffectiveNowMillis, cost})
					}
					st = next
					continue
				}
				rc := receipts[rng.IntN(len(receipts))] // refunded again and again
				rr, next := Refund(p, st, ms, rc[1], rc[0])
				require.Equal(t, StatusAllowed, rr.Status, name)
				require.LessOrEqual(t, rr.Remaining, p.Limit(), name)
				st = next
				for c := int64(1); c <= p.MaxCost(); c++ {
					fresh, _ := Evaluate(p, nil, ms, c)
					got, _ := Evaluate(p, st, ms, c)
					require.NotEqual(t, StatusStateIncompatible, got.Status, name)
					if got.Status == StatusAllowed {
						require.Equal(t, StatusAllowed, fresh.Status, "%s: cost %d", name, c)
						require.LessOrEqual(t, got.Remaining, fresh.Remaining, "%s: cost %d", name, c)
					}
				}
			}
		}
	})
}

// TestRefundArgumentChecks: the receipt's instant is checked after the
// clock, before the state; a refund of another revision's state is
// STATE_INCOMPATIBLE and writes nothing.
func TestRefundArgumentChecks(t *testing.T) {
	for _, alg := range algorithms {
		p := smallPolicy(t, alg, 0)
		for _, at := range []int64{-1, ratelimit.MaxServerMillis + 1} {
			r, _ := Refund(p, State("garbage"), t0, 1, at)
			assert.Equal(t, fail(StatusInvalid, t0), r, "%v at %d", alg, at)
		}
		r, _ := Refund(p, nil, ratelimit.MaxServerMillis+1, 1, -1)
		assert.Equal(t, StatusClockUnsafe, r.Status)
		r, _ = Refund(p, nil, t0, p.Limit()+1, t0)
		assert.Equal(t, StatusInvalid, r.Status)
		r, _ = Refund(p, State("garbage"), t0, 1, t0)
		assert.Equal(t, StatusStateIncompatible, r.Status)
		_, st := Evaluate(mustPolicyRev(t, p, 8), nil, t0, 1)
		r, same := Refund(p, st, t0, 1, t0)
		assert.Equal(t, StatusStateIncompatible, r.Status, "%v: another revision's state", alg)
		assert.Equal(t, st, same)
	}
}

// mustPolicyRev is p at another revision.
func mustPolicyRev(t testing.TB, p ratelimit.Policy, rev int64) ratelimit.Policy {
	t.Helper()
	q, err := ratelimit.NewPolicy(ratelimit.PolicySpec{
		ID: "programs-test", Revision: rev, Algorithm: p.Algorithm(), Params: p.Params(), MaxCost: p.MaxCost(),
		CleanupGrace: p.CleanupGrace(), MaxClockRegression: p.MaxClockRegression(), FailurePolicy: ratelimit.FailClosed,
	})
	require.NoError(t, err)
	return q
}

// TestRefundLuaMatchesModel runs random traces of decisions, charges and
// refunds (of past admissions' receipts, stale or not, and of receipts
// that match nothing) through the Lua programs on miniredis with TIME set
// to the microsecond: every reply, stored value (or its absence) and TTL
// equals the model's.
func TestRefundLuaMatchesModel(t *testing.T) {
	for name, p := range refundPolicies(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			m := newMini(t)
			alg := p.Algorithm()
			prog, charge, rf := mustProgram(t, alg), mustCharge(t, alg), mustRefund(t, alg)
			rng := rand.New(rand.NewPCG(2023, uint64(len(name))))
			us := t0*1000 + rng.Int64N(1000)
			var st State
			var receipts [][2]int64
			counts := map[string]int{}
			for step := range 400 {
				us += rng.Int64N(120_000)
				cost := 1 + rng.Int64N(p.MaxCost())
				var want Reply
				var next State
				var pr Program
				var args []any
				kind := "decide"
				switch x := rng.IntN(10); {
				case x < 5 || len(receipts) == 0:
					want, next = EvaluateMicros(p, st, us, cost)
					pr, args = prog, Args(p, cost)
					if want.Status == StatusAllowed {
						receipts = append(receipts, [2]int64{want.EffectiveNowMillis, cost})
					}
				case x == 5:
					kind = "charge"
					want, next = ChargeMicros(p, st, us, cost)
					pr, args = charge, Args(p, cost)
				default:
					kind = "refund"
					rc := receipts[len(receipts)-1-rng.IntN(min(len(receipts), 4))]
					if x == 9 {
						rc = [2]int64{us/1000 - rng.Int64N(1500), cost}
					}
					want, next = RefundMicros(p, st, us, rc[1], rc[0])
					pr, args = rf, RefundArgs(p, rc[1], rc[0])
					if want.RetryAfterMillis > 0 {
						counts["given back"]++
					}
				}
				counts[kind]++
				v, err := m.runMicros(pr, us, "k", args...)
				require.NoError(t, err)
				got := toReply(t, v)
				require.Equal(t, want, got, "step %d %s at %d µs", step, kind, us)
				wrote := string(next) != string(st) || (next == nil) != (st == nil)
				st = next
				require.Equal(t, st, getState(t, m.c, "k"), "step %d %s: stored value", step, kind)
				if wrote && st != nil {
					require.Equal(t, got.ExpiryMillis(p), m.srv.TTL("k").Milliseconds(), "step %d %s: TTL", step, kind)
				}
			}
			t.Logf("%s: %v", name, counts)
			require.Positive(t, counts["given back"], fmt.Sprint(counts))
			require.Positive(t, counts["refund"]-counts["given back"], "stale receipts too: %v", counts)
		})
	}
}

// TestRefundProgramSourceRules is TestProgramSourceRules for the refund
// programs, whose writes differ: TIME once, one GET, every SET with the
// decision's TTL rule, one DEL (a state left empty), one key, no float
// literal, and the shared numeric edges.
func TestRefundProgramSourceRules(t *testing.T) {
	floatLit := regexp.MustCompile(`\b\d+\.\d+|\d[eE][+-]?\d`)
	for _, alg := range algorithms {
		p := mustRefund(t, alg)
		code := stripLuaComments(p.Source)
		assert.True(t, strings.HasPrefix(p.Source, "#!lua\n"), p.Name)
		assert.Equal(t, 1, strings.Count(strings.ToUpper(code), "TIME"), p.Name)
		assert.Equal(t, 1, strings.Count(code, "'GET'"), p.Name)
		assert.Equal(t, 1, strings.Count(code, "redis.call('DEL', KEYS[1])"), p.Name)
		sets := strings.Count(code, "'SET'")
		assert.Positive(t, sets, p.Name)
		assert.Len(t, regexp.MustCompile(`redis\.call\('SET', KEYS\[1\], [^\n]*(\n\s*)?'PX', reset - now \+ grace\)`).FindAllString(code, -1), sets, p.Name)
		assert.NotRegexp(t, `KEYS\[[02-9]`, code, p.Name)
		for _, banned := range []string{"'HSET'", "PERSIST", "PEXPIRE", "tostring(", "string.format", "math.ceil", "math.huge"} {
			assert.NotContains(t, code, banned, p.Name)
		}
		assert.Empty(t, floatLit.FindAllString(code, -1), p.Name)
		assert.Equal(t, ratelimit.MaxExactInt, luaConst(t, p.Source, "M"))
		assert.Equal(t, ratelimit.MaxServerMillis, luaConst(t, p.Source, "S"))
	}
}
