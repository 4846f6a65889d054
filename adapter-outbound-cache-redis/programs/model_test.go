package programs

import (
	"fmt"
	"math/big"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

const t0 int64 = 1_796_000_000_000

// TestDenialConsumesNothing: a denied request leaves the state byte for byte
// as it was, so the units it asked for are still there for a smaller one.
func TestDenialConsumesNothing(t *testing.T) {
	for _, a := range algorithms {
		t.Run(a.String(), func(t *testing.T) {
			onEngines(t, func(t *testing.T, e engine) {
				p := smallPolicy(t, a, time.Second)
				r := e.eval(t, p, t0, 4)
				require.Equal(t, StatusAllowed, r.Status)
				require.Equal(t, int64(1), r.Remaining)
				before := cloneState(e.state(t))
				r = e.eval(t, p, t0+1, 2)
				require.Equal(t, StatusDenied, r.Status)
				require.Equal(t, int64(1), r.Remaining)
				require.Equal(t, before, e.state(t), "a denial writes nothing")
				r = e.eval(t, p, t0+2, 1)
				require.Equal(t, StatusAllowed, r.Status, "the unit the denial did not spend is still there")
				require.Equal(t, int64(0), r.Remaining)
			})
		})
	}
}

// TestExactBoundaryAfterDenial: after a denial, the same request is denied
// 1 ms before now+retryAfter and allowed exactly at it.
func TestExactBoundaryAfterDenial(t *testing.T) {
	for _, a := range algorithms {
		t.Run(a.String(), func(t *testing.T) {
			onEngines(t, func(t *testing.T, e engine) {
				p := smallPolicy(t, a, time.Second)
				require.Equal(t, StatusAllowed, e.eval(t, p, t0+17, 5).Status)
				d := e.eval(t, p, t0+30, 3)
				require.Equal(t, StatusDenied, d.Status)
				require.Positive(t, d.RetryAfterMillis)
				before := cloneState(e.state(t))
				early := e.eval(t, p, d.EffectiveNowMillis+d.RetryAfterMillis-1, 3)
				require.Equal(t, StatusDenied, early.Status, "1 ms early")
				require.Equal(t, before, e.state(t))
				onTime := e.eval(t, p, d.EffectiveNowMillis+d.RetryAfterMillis, 3)
				require.Equal(t, StatusAllowed, onTime.Status, "at now+retryAfter")
			})
		})
	}
}

// TestClockRegressionClampAndUnsafe: server time going back by at most
// MaxClockRegression is clamped to lastObservedMillis (which never moves
// back); one more millisecond is CLOCK_UNSAFE and writes nothing.
func TestClockRegressionClampAndUnsafe(t *testing.T) {
	for _, a := range algorithms {
		for _, reg := range []int64{0, 1000} {
			t.Run(fmt.Sprintf("%v/regression=%dms", a, reg), func(t *testing.T) {
				onEngines(t, func(t *testing.T, e engine) {
					p := smallPolicy(t, a, time.Duration(reg)*time.Millisecond)
					require.Equal(t, StatusAllowed, e.eval(t, p, t0, 1).Status)
					r := e.eval(t, p, t0-reg, 1)
					require.Equal(t, StatusAllowed, r.Status)
					require.Equal(t, t0-reg, r.ServerNowMillis)
					require.Equal(t, t0, r.EffectiveNowMillis, "clamped to lastObserved")
					require.Equal(t, t0, stateField(t, e.state(t), FieldLastObserved), "time is never written backwards")
					before := cloneState(e.state(t))
					r = e.eval(t, p, t0-reg-1, 1)
					require.Equal(t, Reply{Status: StatusClockUnsafe, ServerNowMillis: t0 - reg - 1, EffectiveNowMillis: t0, RetryAfterMillis: 1}, r)
					require.Equal(t, before, e.state(t), "CLOCK_UNSAFE writes nothing")
					r = e.eval(t, p, t0-reg-500, 1)
					require.Equal(t, int64(500), r.RetryAfterMillis, "wait until the regression is tolerated again")
				})
			})
		}
	}
}

// TestServerTimeBeyondMaxIsClockUnsafe: TIME past MaxServerMillis (2^45 ms)
// is CLOCK_UNSAFE with every field 0 and nothing written, on an empty key and
// on existing state; MaxServerMillis itself is still served.
func TestServerTimeBeyondMaxIsClockUnsafe(t *testing.T) {
	for _, a := range algorithms {
		t.Run(a.String(), func(t *testing.T) {
			onEngines(t, func(t *testing.T, e engine) {
				p := smallPolicy(t, a, time.Second)
				r := e.eval(t, p, ratelimit.MaxServerMillis+1, 1)
				require.Equal(t, Reply{Status: StatusClockUnsafe}, r)
				require.Empty(t, e.state(t))
				require.Equal(t, StatusAllowed, e.eval(t, p, ratelimit.MaxServerMillis-5, 1).Status)
				r = e.eval(t, p, ratelimit.MaxServerMillis, 1)
				require.Equal(t, StatusAllowed, r.Status)
				require.Equal(t, ratelimit.MaxServerMillis, r.EffectiveNowMillis)
				before := cloneState(e.state(t))
				for _, now := range []int64{ratelimit.MaxServerMillis + 1, 1 << 50, 1<<53 - 1} {
					require.Equal(t, Reply{Status: StatusClockUnsafe}, e.eval(t, p, now, 1), "now %d", now)
					require.Equal(t, before, e.state(t))
				}
			})
		})
	}
}

// TestInvalidCost: a cost outside 1..limit is INVALID and writes nothing.
func TestInvalidCost(t *testing.T) {
	for _, a := range algorithms {
		t.Run(a.String(), func(t *testing.T) {
			onEngines(t, func(t *testing.T, e engine) {
				p := smallPolicy(t, a, time.Second)
				for _, cost := range []int64{0, 6} {
					require.Equal(t, Reply{Status: StatusInvalid, ServerNowMillis: t0}, e.eval(t, p, t0, cost))
					require.Empty(t, e.state(t))
				}
			})
		})
	}
}

// TestTokenRefillRemainderCarry: the bucket's level depends only on elapsed
// time and what was spent, not on how often it was evaluated: many small
// admissions at random instants leave exactly the level that one admission
// of the same total at the last instant leaves, and both equal the exact
// rational level.
func TestTokenRefillRemainderCarry(t *testing.T) {
	const capacity, rate, period = 1000, 3, 1000 // 0.003 tokens per ms
	p := mustPolicy(t, ratelimit.AlgorithmTokenBucket,
		ratelimit.TokenBucket{Capacity: capacity, RefillTokens: rate, RefillPeriod: period * time.Millisecond},
		capacity, time.Second, time.Second)
	onEngines(t, func(t *testing.T, e engine) {
		rng := rand.New(rand.NewPCG(4, 2))
		require.Equal(t, StatusAllowed, e.eval(t, p, t0, capacity).Status)
		now, spent := t0, int64(0)
		for i := 0; i < 300; i++ {
			now += 1 + rng.Int64N(400)
			if e.eval(t, p, now, 1).Status == StatusAllowed {
				spent++
			}
		}
		require.Positive(t, spent)
		many := cloneState(e.state(t))

		e.seed(t, nil)
		require.Equal(t, StatusAllowed, e.eval(t, p, t0, capacity).Status)
		require.Equal(t, StatusAllowed, e.eval(t, p, now, spent).Status)

		// The exact level at the probe instants, as a rational.
		for _, probe := range []int64{now, now + 1, now + 333, now + 5000} {
			level := new(big.Rat).SetFrac64((probe-t0)*rate, period)
			level.Sub(level, big.NewRat(spent, 1))
			floor := new(big.Int).Quo(level.Num(), level.Denom()).Int64()

			e.seed(t, cloneState(many))
			a := e.eval(t, p, probe, capacity)
			e.seed(t, nil)
			require.Equal(t, StatusAllowed, e.eval(t, p, t0, capacity).Status)
			require.Equal(t, StatusAllowed, e.eval(t, p, now, spent).Status)
			b := e.eval(t, p, probe, capacity)
			require.Equal(t, StatusDenied, a.Status)
			require.Equal(t, a, b, "probe at +%d ms: many steps and one step agree", probe-now)
			require.Equal(t, floor, a.Remaining, "probe at +%d ms: remaining is floor of the exact level", probe-now)
		}
	})
}

// TestRetryAfterIsHonest: on random policies and traffic, every denial's
// retryAfter is exact: the same request with no other traffic is denied at
// effectiveNow+retryAfter-1 and allowed at effectiveNow+retryAfter, and the
// reply passes Check.
func TestRetryAfterIsHonest(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	denials := 0
	for i := 0; i < 600; i++ {
		p := randomPolicy(t, rng)
		var st State
		now := t0 + rng.Int64N(1_000_000)
		for step := 0; step < 40; step++ {
			now += rng.Int64N(p.Limit()*3+50) - 5
			cost := 1 + rng.Int64N(p.MaxCost())
			r, next := Evaluate(p, st, now, cost)
			require.NoError(t, r.Check(p), "%v %+v", p, r)
			if r.Status == StatusDenied {
				denials++
				early, _ := Evaluate(p, st, r.EffectiveNowMillis+r.RetryAfterMillis-1, cost)
				require.Equal(t, StatusDenied, early.Status, "%v: 1 ms before retry (%+v)", p, r)
				late, _ := Evaluate(p, st, r.EffectiveNowMillis+r.RetryAfterMillis, cost)
				require.Equal(t, StatusAllowed, late.Status, "%v: at retry (%+v)", p, r)
			}
			st = next
		}
	}
	require.Greater(t, denials, 1000)
}

// randomPolicy draws a small valid policy of a random algorithm.
func randomPolicy(t testing.TB, rng *rand.Rand) ratelimit.Policy {
	t.Helper()
	ms := func(n int64) time.Duration { return time.Duration(n) * time.Millisecond }
	limit := 1 + rng.Int64N(20)
	reg := ms([]int64{0, 10, 1000}[rng.IntN(3)])
	switch a := algorithms[rng.IntN(3)]; a {
	case ratelimit.AlgorithmFixedWindow:
		return mustPolicy(t, a, ratelimit.FixedWindow{Limit: limit, Window: ms(1 + rng.Int64N(2000))}, limit, time.Second, reg)
	case ratelimit.AlgorithmSlidingWindowCounter:
		return mustPolicy(t, a, ratelimit.SlidingWindowCounter{Limit: limit, Window: ms(1 + rng.Int64N(2000))}, limit, time.Second, reg)
	default:
		return mustPolicy(t, a, ratelimit.TokenBucket{Capacity: limit, RefillTokens: 1 + rng.Int64N(60), RefillPeriod: ms(1 + rng.Int64N(3000))}, limit, time.Second, reg)
	}
}
