package gcraparity

import (
	"context"
	"fmt"
	"math/big"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/programs"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/programs/luasrc"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// jan2017 is redis_rate's epoch: it stores TAT as float seconds after it.
const jan2017 = 1483228800

// exact is the exact GCRA (rationals, µs): TAT, or nil for no state.
type exact struct{ tat *big.Rat }

// allow is redis_rate's rule in exact arithmetic: admitted iff
// max(TAT, now) + cost*T - now <= burst*T; an admission moves TAT.
func (e *exact) allow(now int64, cost int64, T *big.Rat, burst int64) bool {
	n := big.NewRat(now, 1)
	base := new(big.Rat).Set(n)
	if e.tat != nil && e.tat.Cmp(n) > 0 {
		base.Set(e.tat)
	}
	next := new(big.Rat).Add(base, new(big.Rat).Mul(big.NewRat(cost, 1), T))
	if new(big.Rat).Sub(next, n).Cmp(new(big.Rat).Mul(big.NewRat(burst, 1), T)) > 0 {
		return false
	}
	e.tat = next
	return true
}

// side runs both limiters on one miniredis.
type side struct {
	t    *testing.T
	srv  *miniredis.Miniredis
	c    *redis.Client
	rr   *redis_rate.Limiter
	body string // rate-gcra-v1 as miniredis runs it
}

func newSide(t *testing.T) *side {
	srv := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1, Protocol: 2})
	t.Cleanup(func() { _ = c.Close() })
	prog, ok := programs.ForAlgorithm(ratelimit.AlgorithmGCRA)
	require.True(t, ok, "%v", programs.Verify())
	require.True(t, strings.HasPrefix(prog.Source, "#!lua\n"))
	// miniredis does not take the shebang line (Redis consumes it) and has
	// no struct library: blank the line, prepend the shim.
	return &side{t: t, srv: srv, c: c, rr: redis_rate.NewLimiter(c), body: luasrc.StructShim + prog.Source[len("#!lua"):]}
}

// gcra runs rate-gcra-v1 for p on key; it reports admission.
func (s *side) gcra(p ratelimit.Policy, key string, cost int64) bool {
	res, err := s.c.Eval(context.Background(), s.body, []string{key}, programs.Args(p, cost)...).Int64Slice()
	require.NoError(s.t, err)
	require.Len(s.t, res, programs.ReplyLen)
	st := programs.Status(res[programs.ReplyStatus])
	require.Contains(s.t, []programs.Status{programs.StatusAllowed, programs.StatusDenied}, st, "reply %v", res)
	return st == programs.StatusAllowed
}

// redisRateTAT is redis_rate's stored TAT in µs since the Unix epoch,
// exactly (the double it stored, as a rational); ok is false when it has
// no state.
func (s *side) redisRateTAT(key string) (*big.Rat, bool) {
	v, err := s.c.Get(context.Background(), "rate:"+key).Result()
	if err == redis.Nil {
		return nil, false
	}
	require.NoError(s.t, err)
	f, err := strconv.ParseFloat(v, 64)
	require.NoError(s.t, err)
	r := new(big.Rat).SetFloat64(f)
	r.Add(r, big.NewRat(jan2017, 1))
	return r.Mul(r, big.NewRat(1_000_000, 1)), true
}

// mismatch is one step where redis_rate and the GCRA policy admitted
// differently, with its reason.
type mismatch struct {
	step           int
	redisRate      bool
	reason         string
	driftMicros    float64 // redis_rate's TAT minus the exact TAT, before the step
	costAboveBurst bool
}

// trace is one random request trace: gaps in µs and costs.
type trace struct {
	name         string
	limit        redis_rate.Limit
	steps        int
	maxGapMicros int64
	maxCost      int64 // costs 1..maxCost; above the burst only when allowed
	overBurst    bool  // some steps cost burst+1 (redis_rate#103)
}

// run runs tr on both limiters at identical instants and returns the
// steps compared and the mismatches. The GCRA policy must equal the exact
// rule at every step; every mismatch must be explained.
func (s *side) run(tr trace, seed uint64) (int, []mismatch) {
	t := s.t
	p, err := ratelimit.NewPolicy(ratelimit.PolicySpec{
		ID: "parity", Revision: 1, Algorithm: ratelimit.AlgorithmGCRA,
		Params:  ratelimit.GCRA{Rate: int64(tr.limit.Rate), Period: tr.limit.Period, Burst: int64(tr.limit.Burst)},
		MaxCost: int64(tr.limit.Burst), CleanupGrace: time.Minute, FailurePolicy: ratelimit.FailClosed,
	})
	require.NoError(t, err)
	T := big.NewRat(tr.limit.Period.Microseconds(), int64(tr.limit.Rate))
	burst := int64(tr.limit.Burst)
	rng := rand.New(rand.NewPCG(seed, 22))
	key := fmt.Sprintf("%s-%d", tr.name, seed)
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC).UnixMicro() + rng.Int64N(1_000_000)
	var ref exact
	var out []mismatch
	for i := range tr.steps {
		now += rng.Int64N(tr.maxGapMicros + 1)
		cost := 1 + rng.Int64N(tr.maxCost)
		over := tr.overBurst && rng.IntN(50) == 0
		if over {
			cost = burst + 1
		}
		// redis_rate's stored TAT against the exact one, before the step.
		var drift float64
		if rrTAT, ok := s.redisRateTAT(key); ok && ref.tat != nil {
			drift, _ = new(big.Rat).Sub(rrTAT, ref.tat).Float64()
		}
		s.srv.SetTime(time.UnixMicro(now))
		rrRes, err := s.rr.AllowN(context.Background(), key, tr.limit, int(cost))
		require.NoError(t, err)
		rrAllowed := rrRes.Allowed > 0
		if over {
			// redis_rate#103: a finite retry-after for a request no wait
			// admits. The policy refuses the cost before any round trip.
			require.False(t, rrAllowed)
			require.Positive(t, rrRes.RetryAfter, "redis_rate gives a finite retry-after")
			require.ErrorIs(t, ratelimit.Request{PolicyID: "parity", SubjectDigest: "parity-subject-000000", Cost: cost,
				Deadline: time.Now().Add(time.Minute)}.ValidateFor(p), ratelimit.ErrCostAboveMaxCost)
			out = append(out, mismatch{step: i, redisRate: false, reason: fmt.Sprintf("cost %d > burst %d: redis_rate answers retry-after %v, which never admits; the policy refuses the request", cost, burst, rrRes.RetryAfter), costAboveBurst: true})
			continue
		}
		exactAllowed := ref.allow(now, cost, T, burst)
		ours := s.gcra(p, key, cost)
		require.Equal(t, exactAllowed, ours, "%s step %d at %d µs cost %d: the GCRA policy differs from the exact rule", tr.name, i, now, cost)
		if rrAllowed == ours {
			continue
		}
		out = append(out, mismatch{step: i, redisRate: rrAllowed, driftMicros: drift,
			reason: fmt.Sprintf("float: redis_rate's TAT is %+.4f µs off the exact TAT (each tat + cost*T is rounded to a double of seconds since 2017, an ulp of about 0.06 µs)", drift)})
		// Start both over from an empty state at this instant, so that the
		// rest of the trace compares like with like.
		require.NoError(t, s.c.Del(context.Background(), "rate:"+key, key).Err())
		ref = exact{}
	}
	return tr.steps, out
}

// TestRedisRateParity is issue 22 item 4: redis_rate and the GCRA policy
// with the same Limit, on the same Redis at the same instants, admit the
// same requests, except where redis_rate's float arithmetic is wrong; each
// such step is named with its reason. The GCRA policy equals the exact
// rule at every step. One trace has 10,000 steps at 10,000 per second
// (T = 100 µs), where redis_rate's float TAT (about 3e8 s, an ulp of
// 6e-8 s) drifts.
func TestRedisRateParity(t *testing.T) {
	traces := []trace{
		{name: "per-second 10, burst 10", limit: redis_rate.PerSecond(10), steps: 1000, maxGapMicros: 200_000, maxCost: 3, overBurst: true},
		{name: "3 per second, burst 5", limit: redis_rate.Limit{Rate: 3, Burst: 5, Period: time.Second}, steps: 1000, maxGapMicros: 700_000, maxCost: 5, overBurst: true},
		{name: "per-minute 100, burst 1", limit: redis_rate.Limit{Rate: 100, Burst: 1, Period: time.Minute}, steps: 1000, maxGapMicros: 1_200_000, maxCost: 1},
		{name: "10,000 per second, burst 20 (drift)", limit: redis_rate.Limit{Rate: 10_000, Burst: 20, Period: time.Second}, steps: 10_000, maxGapMicros: 200, maxCost: 3},
	}
	s := newSide(t)
	for _, tr := range traces {
		t.Run(tr.name, func(t *testing.T) {
			s.t = t
			steps, ms := s.run(tr, 1)
			float, over := 0, 0
			for _, m := range ms {
				if m.costAboveBurst {
					over++
					continue
				}
				float++
				// Explained: redis_rate's TAT is off the exact one in the
				// direction of its error (earlier: it admits what the
				// exact rule denies; later: the reverse).
				if m.redisRate {
					require.Negative(t, m.driftMicros, "step %d: %s", m.step, m.reason)
				} else {
					require.Positive(t, m.driftMicros, "step %d: %s", m.step, m.reason)
				}
				t.Logf("step %d: redis_rate admitted=%t, the policy %t: %s", m.step, m.redisRate, !m.redisRate, m.reason)
			}
			t.Logf("%s: %d steps, %d equal, %d float mismatches, %d cost > burst", tr.name, steps, steps-len(ms), float, over)
			require.Less(t, float*100, steps, "at most 1%% of the steps differ by float error")
		})
	}
}
