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

// This file tests the leaky bucket as a queue (ADR 0028): the exact GCRA
// reference of gcra_test.go with a burst of queueSize+1 and the delay term
// written independently (math/big), against the model, and the model
// against the Lua decision, charge and refund programs at the microsecond.

// enqueue is the exact reference's leaky-bucket decision: GCRA's with a
// burst of QueueSize+1; an admission's delay is its slot max(TAT, now)
// less DelayAfter emission intervals, after the effective instant, rounded
// up to a millisecond.
func (r *gcraRef) enqueue(q ratelimit.LeakyBucket, reg, us, cost int64) Reply {
	effUs := big.NewRat(us, 1)
	if r.tat != nil && floorDiv(us, 1000) < r.last {
		effUs = big.NewRat(r.last*1000, 1)
	}
	ahead := new(big.Rat) // slot - effective instant
	if r.tat != nil && r.tat.Cmp(effUs) > 0 {
		ahead.Sub(r.tat, effUs)
	}
	rep := r.decide(q.Rate, q.Period.Milliseconds(), q.QueueSize+1, reg, us, cost)
	if rep.Status != StatusAllowed {
		return rep
	}
	T := big.NewRat(q.Period.Milliseconds()*1000, q.Rate)
	wait := new(big.Rat).Sub(ahead, new(big.Rat).Mul(big.NewRat(q.DelayAfter, 1), T))
	if wait.Sign() > 0 {
		rep.RetryAfterMillis = ratCeil(new(big.Rat).Quo(wait, big.NewRat(1000, 1)))
	}
	return rep
}

func leakyPolicy(t testing.TB, q ratelimit.LeakyBucket, reg time.Duration) ratelimit.Policy {
	t.Helper()
	if q.MaxDelay == 0 {
		q.MaxDelay = q.LongestDelay()
	}
	return mustPolicy(t, ratelimit.AlgorithmLeakyBucket, q, q.QueueSize+1, vectorGrace, reg)
}

// leakyShapes: the queue (10/s, 20 waiting, no delay-free ones),
// nginx's burst with delay= (some go at once), a queue of 0 (a pure rate),
// emission intervals with a remainder (3/s, 7 per 3 ms) and a clock
// regression allowance.
func leakyShapes(t testing.TB) []ratelimit.Policy {
	return []ratelimit.Policy{
		leakyPolicy(t, ratelimit.LeakyBucket{Rate: 10, Period: time.Second, QueueSize: 20}, 0),
		leakyPolicy(t, ratelimit.LeakyBucket{Rate: 5, Period: time.Second, QueueSize: 12, DelayAfter: 8}, 5*time.Millisecond),
		leakyPolicy(t, ratelimit.LeakyBucket{Rate: 3, Period: time.Second, QueueSize: 4, DelayAfter: 4}, 0),
		leakyPolicy(t, ratelimit.LeakyBucket{Rate: 1000, Period: time.Second, QueueSize: 0}, 0),
		leakyPolicy(t, ratelimit.LeakyBucket{Rate: 7, Period: 3 * time.Millisecond, QueueSize: 6, DelayAfter: 2}, 5*time.Millisecond),
	}
}

// TestLeakyModelMatchesExactReference: on random traces of every shape the
// model's reply (the delay included) equals the exact reference's, only
// admissions write, the stored TAT is the reference's, and every delay is
// within the policy's longest (the bound MaxDelay is checked against).
func TestLeakyModelMatchesExactReference(t *testing.T) {
	for i, p := range leakyShapes(t) {
		t.Run(fmt.Sprint(p.Params()), func(t *testing.T) {
			q := p.Params().(ratelimit.LeakyBucket)
			rng := rand.New(rand.NewPCG(uint64(i), 28))
			times, costs := gcraTrace(p, rng, t0*1000+rng.Int64N(1000), 3000)
			var ref gcraRef
			var st State
			counts := map[string]int{}
			for k, us := range times {
				want := ref.enqueue(q, p.MaxClockRegression().Milliseconds(), us, costs[k])
				var c calc
				ms, frac := splitMicros(us)
				got, next := evaluate(p, st, ms, frac, costs[k], &c)
				require.False(t, c.overflow)
				require.Equal(t, want, got, "step %d at %d µs cost %d", k, us, costs[k])
				require.NoError(t, got.Check(p), "step %d", k)
				if got.Status != StatusAllowed {
					counts[got.Status.String()]++
					require.Equal(t, st, next, "step %d: only an admission writes", k)
					continue
				}
				require.LessOrEqual(t, got.RetryAfterMillis, q.LongestDelay().Milliseconds(), "step %d: delay", k)
				if got.RetryAfterMillis > 0 {
					counts["delayed"]++
				} else {
					counts["at once"]++
				}
				require.Zero(t, gcraTAT(t, p, next).Cmp(ref.tat), "step %d: stored TAT", k)
				st = next
			}
			require.Positive(t, counts["at once"], "%v", counts)
			require.Positive(t, counts[StatusDenied.String()], "%v", counts)
			if q.DelayAfter < q.QueueSize {
				require.Positive(t, counts["delayed"], "%v", counts)
			}
		})
	}
}

// TestLeakyQueueSlots: the queue (10/s, queueSize 20, delayAfter
// 0) sent 100 requests in one millisecond admits 21, the first at once and
// the others in slots 100 ms apart, and denies the rest with the wait
// until the first slot frees; a refund of the last admission gives its slot
// to the next request.
func TestLeakyQueueSlots(t *testing.T) {
	p := leakyShapes(t)[0]
	var st State
	var delays []int64
	for k := range 100 {
		r, next := EvaluateMicros(p, st, t0*1000, 1)
		if r.Status == StatusAllowed {
			delays = append(delays, r.RetryAfterMillis)
			st = next
			continue
		}
		require.Equal(t, StatusDenied, r.Status, "request %d", k)
		require.Equal(t, int64(100), r.RetryAfterMillis, "request %d: the queue has room when the first waiter leaves", k)
	}
	require.Len(t, delays, 21)
	for k, d := range delays {
		require.Equal(t, int64(100*k), d, "request %d's slot", k)
	}
	back, st := RefundMicros(p, st, t0*1000+1, 1, t0)
	require.Equal(t, int64(1), back.RetryAfterMillis, "one unit given back")
	r, _ := EvaluateMicros(p, st, t0*1000+2, 1)
	require.Equal(t, StatusAllowed, r.Status, "the refunded slot is taken by the next request")
	require.Equal(t, int64(2000), r.RetryAfterMillis)
}

// TestLeakyLuaMatchesModel runs random traces through the Lua decision,
// charge and refund programs on miniredis with TIME set to the
// microsecond: every reply, stored value and TTL equals the model's.
func TestLeakyLuaMatchesModel(t *testing.T) {
	for i, p := range leakyShapes(t) {
		t.Run(fmt.Sprint(p.Params()), func(t *testing.T) {
			t.Parallel()
			m := newMini(t)
			prog, charge, refund := mustProgram(t, ratelimit.AlgorithmLeakyBucket), mustCharge(t, ratelimit.AlgorithmLeakyBucket), mustRefund(t, ratelimit.AlgorithmLeakyBucket)
			bound := mustBind(t, p)
			rng := rand.New(rand.NewPCG(uint64(i), 6))
			times, costs := gcraTrace(p, rng, t0*1000+rng.Int64N(1000), 300)
			var st State
			var admittedAt int64 = -1
			ops := map[string]int{}
			for k, us := range times {
				var want Reply
				var next State
				var v []int64
				var err error
				decided := false
				switch op := rng.IntN(6); {
				case op == 0:
					want, next = ChargeMicros(p, st, us, costs[k])
					v, err = m.runMicros(charge, us, "q", Args(p, costs[k])...)
					ops["charge"]++
				case op == 1 && admittedAt >= 0:
					want, next = RefundMicros(p, st, us, costs[k], admittedAt)
					v, err = m.runMicros(refund, us, "q", RefundArgs(p, costs[k], admittedAt)...)
					ops["refund"]++
				default:
					want, next = EvaluateMicros(p, st, us, costs[k])
					decided = true
					if k%2 == 1 {
						// Every other decision by the bound program, on the
						// same state (ADR 0030).
						v, err = m.runMicros(bound, us, "q", BoundArgs(p, costs[k])...)
					} else {
						v, err = m.runMicros(prog, us, "q", Args(p, costs[k])...)
					}
					if want.Status == StatusAllowed {
						admittedAt = want.EffectiveNowMillis
						if want.RetryAfterMillis > 0 {
							ops["delayed"]++
						}
					}
				}
				require.NoError(t, err)
				got := toReply(t, v)
				require.Equal(t, want, got, "step %d at %d µs cost %d", k, us, costs[k])
				st = next
				require.Equal(t, st, getState(t, m.c, "q"), "step %d: stored value", k)
				if decided && got.Status == StatusAllowed {
					require.Equal(t, got.ExpiryMillis(p), m.srv.TTL("q").Milliseconds(), "step %d: TTL", k)
				}
			}
			require.Positive(t, ops["refund"], "%v", ops)
		})
	}
}
