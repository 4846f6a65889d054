package programs

import (
	"context"
	"flag"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// This file tests GCRA (ADR 0021) at microsecond resolution: an exact
// reference written independently of the model (math/big rationals, in the
// form redis_rate states the algorithm: TAT, emission interval T =
// period/rate, burst offset B*T), random traces of it against the model and
// the Lua programs, and the vectors testdata/gcra-vectors-v1.json, which the
// reference generates (go test -run TestGCRAVectors -update-gcra).

var updateGCRA = flag.Bool("update-gcra", false, "rewrite testdata/gcra-vectors-v1.json from the exact reference")

// gcraRef is the exact reference: the theoretical arrival time tat in
// microseconds as a rational, and the millisecond of the last admission
// (the clock-regression guard), absent before the first admission.
type gcraRef struct {
	tat  *big.Rat // nil: no state
	last int64
}

// decide is one decision at server time us (microseconds), for a policy of
// the given rate per period (whole ms), burst and max clock regression
// (ms). It returns the reply the programs must give and updates r on an
// admission only.
func (r *gcraRef) decide(rate, periodMs, burst, reg, us, cost int64) Reply {
	nowMs := floorDiv(us, 1000)
	effMs, effUs := nowMs, big.NewRat(us, 1)
	if r.tat != nil && nowMs < r.last {
		if r.last-nowMs > reg {
			return Reply{StatusClockUnsafe, nowMs, r.last, 0, 0, r.last - nowMs - reg, 0}
		}
		effMs, effUs = r.last, big.NewRat(r.last*1000, 1)
	}
	T := big.NewRat(periodMs*1000, rate)
	mulT := func(n int64) *big.Rat { return new(big.Rat).Mul(big.NewRat(n, 1), T) }
	base := new(big.Rat).Set(effUs)
	if r.tat != nil && r.tat.Cmp(effUs) > 0 {
		base.Set(r.tat)
	}
	newTat := new(big.Rat).Add(base, mulT(cost))
	ahead := new(big.Rat).Sub(newTat, effUs)
	// remaining: whole emission intervals left of the burst offset.
	left := func(tat *big.Rat) int64 {
		room := new(big.Rat).Sub(mulT(burst), new(big.Rat).Sub(tat, effUs))
		if room.Sign() <= 0 {
			return 0
		}
		return ratFloor(new(big.Rat).Quo(room, T))
	}
	ceilMs := func(x *big.Rat) int64 { return ratCeil(new(big.Rat).Quo(x, big.NewRat(1000, 1))) }
	if ahead.Cmp(mulT(burst)) <= 0 {
		r.tat, r.last = newTat, effMs
		return Reply{StatusAllowed, nowMs, effMs, burst, left(newTat), 0, ceilMs(newTat)}
	}
	allowAt := new(big.Rat).Sub(newTat, mulT(burst))
	return Reply{StatusDenied, nowMs, effMs, burst, left(base), ceilMs(allowAt) - effMs, ceilMs(base)}
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

func ratFloor(x *big.Rat) int64 {
	q := new(big.Int).Div(x.Num(), x.Denom()) // Euclidean: floor for a positive denominator
	return q.Int64()
}

func ratCeil(x *big.Rat) int64 {
	return -ratFloor(new(big.Rat).Neg(x))
}

// gcraTAT decodes a GCRA state's theoretical arrival time, l*1000 + d/R µs.
func gcraTAT(t testing.TB, p ratelimit.Policy, st State) *big.Rat {
	t.Helper()
	f, err := st.Decode()
	require.NoError(t, err)
	rate, _, _, ok := p.Emission()
	require.True(t, ok)
	return new(big.Rat).Add(big.NewRat(f[FieldLastObserved]*1000, 1), big.NewRat(f[FieldArrival], rate))
}

func gcraPolicy(t testing.TB, rate int64, period time.Duration, burst int64, reg time.Duration) ratelimit.Policy {
	t.Helper()
	return mustPolicy(t, ratelimit.AlgorithmGCRA, ratelimit.GCRA{Rate: rate, Period: period, Burst: burst}, burst, vectorGrace, reg)
}

// gcraShapes are the policies of the random traces: redis_rate's PerSecond
// and PerMinute shapes, rates whose emission interval has a remainder
// (3/s, 7 per 3 ms), sub-microsecond intervals (2,000,000/s), bursts of 1
// and of many, and regression 0 and 5 ms.
func gcraShapes(t testing.TB) []ratelimit.Policy {
	return []ratelimit.Policy{
		gcraPolicy(t, 10, time.Second, 10, 0),
		gcraPolicy(t, 3, time.Second, 5, 5*time.Millisecond),
		gcraPolicy(t, 100, time.Minute, 1, 0),
		gcraPolicy(t, 7, 3*time.Millisecond, 4, 5*time.Millisecond),
		gcraPolicy(t, 1000, time.Second, 50, 5*time.Millisecond),
		gcraPolicy(t, 2_000_000, time.Second, 3, 0),
		gcraPolicy(t, 1, time.Hour, 3, 0),
	}
}

// gcraTrace is a random trace for p: each step's time (µs, mostly forward
// by 0..3 emission intervals, sometimes back within and beyond the
// regression) and cost (1..burst).
func gcraTrace(p ratelimit.Policy, rng *rand.Rand, start int64, n int) (times, costs []int64) {
	rate, per, burst, _ := p.Emission()
	interval := max(1, per/rate)
	now := start
	for range n {
		switch k := rng.IntN(20); {
		case k == 0:
			now -= rng.Int64N(8_000) // back up to 8 ms
		case k == 1:
			now += interval * burst * int64(rng.IntN(3)) // up to two fills
		default:
			now += rng.Int64N(3*interval + 1)
		}
		times = append(times, now)
		costs = append(costs, 1+rng.Int64N(burst))
	}
	return times, costs
}

// TestGCRAModelMatchesExactReference: on random traces of every shape the
// model's reply equals the exact reference's, only admissions write, and
// the stored state decodes to the reference's TAT exactly.
func TestGCRAModelMatchesExactReference(t *testing.T) {
	for i, p := range gcraShapes(t) {
		t.Run(fmt.Sprint(p.Params()), func(t *testing.T) {
			q := p.Params().(ratelimit.GCRA)
			rng := rand.New(rand.NewPCG(uint64(i), 22))
			times, costs := gcraTrace(p, rng, t0*1000+rng.Int64N(1000), 3000)
			var ref gcraRef
			var st State
			counts := map[Status]int{}
			for k, us := range times {
				want := ref.decide(q.Rate, q.Period.Milliseconds(), q.Burst, p.MaxClockRegression().Milliseconds(), us, costs[k])
				var c calc
				ms, frac := splitMicros(us)
				got, next := evaluate(p, st, ms, frac, costs[k], &c)
				require.False(t, c.overflow)
				require.Equal(t, want, got, "step %d at %d µs cost %d", k, us, costs[k])
				require.NoError(t, got.Check(p), "step %d", k)
				counts[got.Status]++
				if got.Status != StatusAllowed {
					require.Equal(t, st, next, "step %d: only an admission writes", k)
					continue
				}
				require.Zero(t, gcraTAT(t, p, next).Cmp(ref.tat), "step %d: stored TAT", k)
				st = next
			}
			require.Positive(t, counts[StatusAllowed])
			require.Positive(t, counts[StatusDenied])
		})
	}
}

// TestGCRANoDriftOverLongRuns: a million admissions at the emission rate of
// 3 per second (interval T = 333,333.3 µs), each arriving at the whole
// microsecond at or before its due instant (so TAT is never reset to now),
// leave TAT exactly start + n*T: the remainder is carried, never rounded
// away, however long it runs. The next admission is then due at exactly
// start + (n-1)*T + T (burst 2), to the microsecond.
func TestGCRANoDriftOverLongRuns(t *testing.T) {
	p := gcraPolicy(t, 3, time.Second, 2, 0)
	start := t0 * 1000
	var st State
	const n = 1_000_001 // (n-1)*T is not a whole µs: the due instant is rounded up
	for k := int64(0); k < n; k++ {
		at := start + k*1_000_000/3 // floor(k*T): never after TAT
		r, next := EvaluateMicros(p, st, at, 1)
		require.Equal(t, StatusAllowed, r.Status, "admission %d at %d µs", k, at)
		st = next
	}
	want := new(big.Rat).Add(big.NewRat(start, 1), big.NewRat(n*1_000_000, 3))
	require.Zero(t, gcraTAT(t, p, st).Cmp(want), "TAT after %d admissions", n)
	// Admitted again once TAT - T = start + (n-1)*T is reached.
	due := start + ceilDiv((n-1)*1_000_000, 3)
	early, _ := EvaluateMicros(p, st, due-1, 1)
	require.Equal(t, StatusDenied, early.Status, "1 µs before the due instant")
	onTime, _ := EvaluateMicros(p, st, due, 1)
	require.Equal(t, StatusAllowed, onTime.Status, "at the due instant")
}

// TestGCRARetryAfterIsHonestAtTheMicrosecond: after a denial, the same
// request at eff + retryAfter ms (any microsecond of it) is admitted, and
// the reply's retry is the smallest whole-millisecond wait: the reference's
// allow instant lies within its last millisecond.
func TestGCRARetryAfterIsHonestAtTheMicrosecond(t *testing.T) {
	for i, p := range gcraShapes(t) {
		rng := rand.New(rand.NewPCG(uint64(i), 7))
		q := p.Params().(ratelimit.GCRA)
		times, costs := gcraTrace(p, rng, t0*1000, 400)
		var st State
		for k, us := range times {
			r, next := EvaluateMicros(p, st, us, costs[k])
			if r.Status == StatusDenied {
				at := (r.EffectiveNowMillis+r.RetryAfterMillis)*1000 + rng.Int64N(1000)
				ok, _ := EvaluateMicros(p, st, at, costs[k])
				require.Equal(t, StatusAllowed, ok.Status, "%v step %d: denied %+v, retried at %d µs", q, k, r, at)
				before := (r.EffectiveNowMillis + r.RetryAfterMillis - 1) * 1000
				if before >= us {
					no, _ := EvaluateMicros(p, st, before, costs[k])
					require.Equal(t, StatusDenied, no.Status, "%v step %d: the start of the previous ms is too early", q, k)
				}
			}
			if r.Status == StatusAllowed {
				st = next
			}
		}
	}
}

// TestGCRALuaMatchesModel runs the same random traces through the Lua
// decision and charge programs on miniredis with TIME set to the
// microsecond: every reply, stored value and TTL equals the model's.
func TestGCRALuaMatchesModel(t *testing.T) {
	for i, p := range gcraShapes(t) {
		t.Run(fmt.Sprint(p.Params()), func(t *testing.T) {
			t.Parallel()
			m := newMini(t)
			prog, charge, bound := mustProgram(t, ratelimit.AlgorithmGCRA), mustCharge(t, ratelimit.AlgorithmGCRA), mustBind(t, p)
			rng := rand.New(rand.NewPCG(uint64(i), 5))
			times, costs := gcraTrace(p, rng, t0*1000+rng.Int64N(1000), 300)
			var st State
			for k, us := range times {
				isCharge := rng.IntN(6) == 0
				want, next := EvaluateMicros(p, st, us, costs[k])
				pr := prog
				if isCharge {
					want, next = ChargeMicros(p, st, us, costs[k])
					pr = charge
				}
				args := Args(p, costs[k])
				if !isCharge && k%2 == 1 {
					// Every other decision by the bound program, on the
					// same state (ADR 0030).
					pr, args = bound, BoundArgs(p, costs[k])
				}
				v, err := m.runMicros(pr, us, "g", args...)
				require.NoError(t, err)
				got := toReply(t, v)
				require.Equal(t, want, got, "step %d at %d µs cost %d charge %v bound %v", k, us, costs[k], isCharge, pr.SHA1 == bound.SHA1)
				st = next
				require.Equal(t, st, getState(t, m.c, "g"), "step %d: stored value", k)
				if got.Status == StatusAllowed {
					require.Equal(t, got.ExpiryMillis(p), m.srv.TTL("g").Milliseconds(), "step %d: TTL", k)
				}
			}
		})
	}
}

func mustCharge(t testing.TB, a ratelimit.Algorithm) Program {
	t.Helper()
	p, ok := ChargeFor(a)
	require.True(t, ok, "charge program for %v", a)
	return p
}

// runMicros is run with TIME at us microseconds (miniredis SetTime keeps
// nanoseconds; the harness serves later instants).
func (m *mini) runMicros(prog Program, us int64, key string, args ...any) ([]int64, error) {
	m.t.Helper()
	double := us < 0 || us > math.MaxInt64/1000
	if !double {
		m.srv.SetTime(time.UnixMicro(us))
	}
	body := harness(double, floorDiv(us, 1_000_000), us-floorDiv(us, 1_000_000)*1_000_000) + luaBody(m.t, prog.Source)
	return evalInts(context.Background(), m.c, body, []string{key}, args...)
}

func (vc gcraVectorCase) policy(t testing.TB) ratelimit.Policy {
	return gcraPolicy(t, vc.Params.Rate, time.Duration(vc.Params.PeriodMillis)*time.Millisecond, vc.Params.Burst,
		time.Duration(vc.MaxClockRegressionMillis)*time.Millisecond)
}

func (st gcraVectorStep) check(t testing.TB, where string, got Reply) {
	t.Helper()
	require.Equal(t, Status(st.Status), got.Status, "%s: status (reply %+v)", where, got)
	if st.EffectiveNowMillis == nil {
		return
	}
	want := Reply{Status(st.Status), floorDiv(st.ServerNowMicros, 1000), *st.EffectiveNowMillis, st.Limit, st.Remaining, st.RetryAfterMillis, st.ResetAtMillis}
	require.Equal(t, want, got, where)
}
