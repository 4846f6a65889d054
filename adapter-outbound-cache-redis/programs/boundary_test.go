package programs

import (
	"fmt"
	"math/big"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

const (
	maxExact = ratelimit.MaxExactInt
	maxSrv   = ratelimit.MaxServerMillis
	horizon  = ratelimit.MaxHorizonMillis
	qmax     = ratelimit.MaxExactInt / ratelimit.WeightScale
	// 2^53-1 = 6361 * 69431 * 20394401: a capacity and a period whose
	// product is exactly MaxExactInt (T1 at its edge).
	edgeCapacity = 6361 * 69431
	edgePeriod   = 20394401
	// The slowest refill whose time to fill from empty, ceil(2^53-1 / R),
	// still fits MaxHorizonMillis - 1 ms of grace (T2 at its edge).
	edgeRate = 977
)

func msd(n int64) time.Duration { return time.Duration(n) * time.Millisecond }

// extremePolicies are valid policies at the arithmetic edges NewPolicy
// accepts: the largest limits, windows, capacity*period, time to fill, grace
// and regression.
func extremePolicies(t testing.TB) map[string]ratelimit.Policy {
	t.Helper()
	fw := ratelimit.AlgorithmFixedWindow
	sw := ratelimit.AlgorithmSlidingWindowCounter
	tb := ratelimit.AlgorithmTokenBucket
	gc := ratelimit.AlgorithmGCRA
	sl := ratelimit.AlgorithmSlidingLog
	return map[string]ratelimit.Policy{
		// L1: the cap; L2: window + grace = H.
		"log: largest limit, largest window":   mustPolicy(t, sl, ratelimit.SlidingLog{Limit: ratelimit.MaxSlidingLogLimit, Window: msd(horizon - 1)}, ratelimit.MaxSlidingLogLimit, msd(1), msd(horizon)),
		"log: largest limit, 1ms window":       mustPolicy(t, sl, ratelimit.SlidingLog{Limit: ratelimit.MaxSlidingLogLimit, Window: msd(1)}, 7, msd(horizon-1), msd(horizon)),
		"log: limit 3, 7ms window":             mustPolicy(t, sl, ratelimit.SlidingLog{Limit: 3, Window: msd(7)}, 3, msd(1), msd(10)),
		"fixed: largest limit, largest window": mustPolicy(t, fw, ratelimit.FixedWindow{Limit: maxExact / 2, Window: msd(horizon - 1)}, maxExact/2, msd(1), msd(horizon)),
		"fixed: largest limit, 1ms window":     mustPolicy(t, fw, ratelimit.FixedWindow{Limit: maxExact / 2, Window: msd(1)}, maxExact/2, msd(horizon-1), msd(horizon)),
		"sliding: largest limit and window":    mustPolicy(t, sw, ratelimit.SlidingWindowCounter{Limit: qmax, Window: msd(qmax)}, qmax, msd(horizon-2*qmax), msd(horizon)),
		"sliding: largest limit, 1ms window":   mustPolicy(t, sw, ratelimit.SlidingWindowCounter{Limit: qmax, Window: msd(1)}, qmax, msd(1), msd(horizon)),
		"sliding: limit 1, largest window":     mustPolicy(t, sw, ratelimit.SlidingWindowCounter{Limit: 1, Window: msd(qmax)}, 1, msd(1), 0),
		"sliding: near-largest limit, 7ms":     mustPolicy(t, sw, ratelimit.SlidingWindowCounter{Limit: qmax - 3, Window: msd(7)}, qmax-3, msd(1), msd(10)),
		"token: C*P = 2^53-1, slowest refill":  mustPolicy(t, tb, ratelimit.TokenBucket{Capacity: edgeCapacity, RefillTokens: edgeRate, RefillPeriod: msd(edgePeriod)}, edgeCapacity, msd(1), msd(horizon)),
		"token: C*P = 2^53-1, fastest refill":  mustPolicy(t, tb, ratelimit.TokenBucket{Capacity: edgeCapacity, RefillTokens: maxExact, RefillPeriod: msd(edgePeriod)}, edgeCapacity, msd(horizon-1), msd(horizon)),
		"token: capacity 2^53-1, 1ms period":   mustPolicy(t, tb, ratelimit.TokenBucket{Capacity: maxExact, RefillTokens: edgeRate, RefillPeriod: msd(1)}, maxExact, msd(1), msd(1000)),
		"token: capacity 1, longest period":    mustPolicy(t, tb, ratelimit.TokenBucket{Capacity: 1, RefillTokens: 2, RefillPeriod: msd(horizon)}, 1, msd(1), msd(horizon)),
		"token: odd remainders":                mustPolicy(t, tb, ratelimit.TokenBucket{Capacity: maxExact / 7919, RefillTokens: 7907, RefillPeriod: msd(7919)}, maxExact/7919, msd(1), msd(3)),
		// G1 at its edge: B*P + 999*R = 2^53-1 exactly (9 per 1 ms: P/R =
		// 1000/9 µs), and the fastest rate G1 allows with burst 1.
		"gcra: B*P + 999*R = 2^53-1":      mustPolicy(t, gc, ratelimit.GCRA{Rate: 9, Period: msd(1), Burst: 9007199254732}, 9007199254732, msd(1), msd(horizon)),
		"gcra: largest rate, burst 1":     mustPolicy(t, gc, ratelimit.GCRA{Rate: 9016215470209, Period: msd(1), Burst: 1}, 1, msd(1), msd(5)),
		"gcra: horizon + grace = H":       mustPolicy(t, gc, ratelimit.GCRA{Rate: 1, Period: msd(1_000_000_000_000), Burst: 1}, 1, msd(horizon-1_000_000_000_001), msd(horizon)),
		"gcra: odd interval, large burst": mustPolicy(t, gc, ratelimit.GCRA{Rate: 7907, Period: msd(7919), Burst: (maxExact - 999*7907) / 7919000}, (maxExact-999*7907)/7919000, msd(1), msd(3)),
	}
}

// worstCase evaluates, in math/big, the docs formulas bounding every
// intermediate of p's arithmetic (docs/programs.md): F1-F2, S1-S3, T1-T2,
// each an instant-plus-offset at the latest server time where one applies.
func worstCase(p ratelimit.Policy) map[string]*big.Int {
	b := func(n int64) *big.Int { return big.NewInt(n) }
	add := func(xs ...*big.Int) *big.Int {
		s := new(big.Int)
		for _, x := range xs {
			s.Add(s, x)
		}
		return s
	}
	mul := func(x, y *big.Int) *big.Int { return new(big.Int).Mul(x, y) }
	n := numbersOf(p)
	grace, srv := b(n.grace), b(maxSrv)
	out := map[string]*big.Int{"A3: serverNow + regression": add(srv, b(n.reg))}
	switch n.alg {
	case ratelimit.AlgorithmFixedWindow:
		out["F1: used + cost <= 2*limit"] = mul(b(2), b(n.limit))
		out["F2: windowEnd + grace <= S + window + grace"] = add(srv, b(n.win), grace)
	case ratelimit.AlgorithmSlidingWindowCounter:
		q := b(ratelimit.WeightScale)
		out["S1: count * weight, budget * Q <= limit * Q"] = mul(b(n.limit), q)
		out["S1: estimate + cost <= 3*limit"] = mul(b(3), b(n.limit))
		out["S2: (window - e) * Q, q * window <= window * Q"] = mul(b(n.win), q)
		out["S3: (k+2)*window + grace <= S + 2*window + grace"] = add(srv, mul(b(2), b(n.win)), grace)
	case ratelimit.AlgorithmTokenBucket:
		out["T1: scaled level, cost*P, elapsed*R < C*P"] = mul(b(n.limit), b(n.per))
		out["T1: tokens*P + remainder <= C*P"] = add(mul(b(n.limit-1), b(n.per)), b(n.per-1))
		fill := new(big.Int).Add(b(n.fullScaled-1), b(n.rate))
		fill.Quo(fill, b(n.rate)) // ceil(C*P / R), computed in big
		out["T2: reset + grace <= S + fill + grace"] = add(srv, fill, grace)
	case ratelimit.AlgorithmGCRA:
		out["G1: d, D + cost*P, frac*R + D <= B*P + 999*R"] = add(mul(b(n.limit), b(n.per)), mul(b(999), b(n.rate)))
		out["G2: reset + grace <= S + horizon + grace"] = add(srv, b(n.horizon()), grace)
	case ratelimit.AlgorithmSlidingLog:
		out["L1: sum + cost <= 2*limit"] = mul(b(2), b(n.limit))
		out["L2: newest + window + grace <= S + window + grace"] = add(srv, b(n.win), grace)
	}
	return out
}

// TestBoundaryArithmeticStaysExact: at every arithmetic edge NewPolicy
// accepts, (1) the docs formulas, evaluated in math/big, stay <= 2^53-1;
// (2) the model, on adversarial states and times up to MaxServerMillis,
// never forms an intermediate above the largest formula bound (so above
// 2^53-1); and (3) the Lua programs, whose numbers are doubles, give
// bit-identical replies and states to the model's exact int64 arithmetic.
func TestBoundaryArithmeticStaysExact(t *testing.T) {
	limit := new(big.Int).SetInt64(maxExact)
	for name, p := range extremePolicies(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			m, n := newMini(t), 0
			bound := new(big.Int)
			for formula, v := range worstCase(p) {
				require.LessOrEqual(t, v.Cmp(limit), 0, "%s = %v exceeds 2^53-1", formula, v)
				if v.Cmp(bound) > 0 {
					bound.Set(v)
				}
			}
			prog := mustProgram(t, p.Algorithm())
			var peak int64
			rng := rand.New(rand.NewPCG(uint64(len(name)), 99))
			for _, base := range []int64{0, 1, t0, maxSrv - numbersOf(p).horizon() - 1, maxSrv - 1000, maxSrv - 1, maxSrv} {
				if base < 0 {
					continue
				}
				for _, st := range adversarialStates(p, base) {
					n++
					key := fmt.Sprintf("edge:%d", n)
					seedMini(t, m, key, st)
					now, cur := base, st
					for step := 0; step < 12; step++ {
						cost := []int64{1, p.MaxCost(), p.MaxCost() / 2, 1 + rng.Int64N(p.MaxCost())}[rng.IntN(4)]
						if cost < 1 {
							cost = 1
						}
						// GCRA reads microseconds: the start, the last and a
						// random microsecond of the millisecond.
						var frac int64
						if p.Algorithm() == ratelimit.AlgorithmGCRA {
							frac = []int64{0, 999, rng.Int64N(1000)}[rng.IntN(3)]
						}
						var c calc
						want, next := evaluate(p, cur, now, frac, cost, &c)
						require.False(t, c.overflow, "model overflow at %d cost %d", now, cost)
						peak = max(peak, c.peak)
						v, err := m.runMicros(prog, now*1000+frac, key, Args(p, cost)...)
						require.NoError(t, err)
						got := toReply(t, v)
						require.Equal(t, want, got, "now %d cost %d state %v", now, cost, cur)
						require.NoError(t, got.Check(p))
						cur = next
						require.Equal(t, cur, getState(t, m.c, key))
						now = nextInstant(rng, p, now)
					}
				}
			}
			require.LessOrEqual(t, new(big.Int).SetInt64(peak).Cmp(bound), 0, "model peak %d above the formula bound %v", peak, bound)
			t.Logf("largest intermediate %d = 2^53-1 - %d (formula bound %v)", peak, maxExact-peak, bound)
		})
	}
}

// adversarialStates are valid stored states that drive the arithmetic to its
// edges at instant base: full windows, maximal previous counts, buckets one
// sub-token short of full, and an absent key.
func adversarialStates(p ratelimit.Policy, base int64) []State {
	n := numbersOf(p)
	alg := int64(n.alg)
	rev := p.Revision()
	out := []State{nil}
	switch n.alg {
	case ratelimit.AlgorithmFixedWindow:
		k := base / n.win
		out = append(out, encodeState(n.alg, SchemaVersion, alg, rev, base, k, n.limit), encodeState(n.alg, SchemaVersion, alg, rev, base, k, 1))
	case ratelimit.AlgorithmSlidingWindowCounter:
		k := base / n.win
		out = append(out,
			encodeState(n.alg, SchemaVersion, alg, rev, base, k, n.limit, n.limit),
			encodeState(n.alg, SchemaVersion, alg, rev, base, k, 1, n.limit))
		if k > 0 {
			prev := k*n.win - 1
			out = append(out, encodeState(n.alg, SchemaVersion, alg, rev, prev, k-1, n.limit, n.limit))
		}
	case ratelimit.AlgorithmTokenBucket:
		out = append(out,
			encodeState(n.alg, SchemaVersion, alg, rev, base, n.limit-1, n.per-1),
			encodeState(n.alg, SchemaVersion, alg, rev, base, 0, 0),
			encodeState(n.alg, SchemaVersion, alg, rev, base/2, 0, n.per-1))
	case ratelimit.AlgorithmGCRA:
		top := n.fullScaled + 999*n.rate // G1: the largest stored offset
		out = append(out,
			encodeState(n.alg, SchemaVersion, alg, rev, base, top),
			encodeState(n.alg, SchemaVersion, alg, rev, base, n.fullScaled),
			encodeState(n.alg, SchemaVersion, alg, rev, base, 1),
			encodeState(n.alg, SchemaVersion, alg, rev, base/2, top))
	case ratelimit.AlgorithmSlidingLog:
		// A full log of (up to 500, so that the pure-Lua struct shim on
		// miniredis stays fast under -race) cost-1 entries and one
		// carrying the rest of the limit, the oldest about to leave; one
		// entry of the whole limit; a full log that left long ago.
		k := min(n.limit, 500)
		ones := make([]LogEntry, k)
		for i := range ones {
			ones[i] = LogEntry{max(0, base-n.win+1) + int64(i)*min(n.win-1, base)/k, 1}
		}
		ones[k-1].Cost += n.limit - k
		out = append(out,
			encodeLog(rev, base, ones),
			encodeLog(rev, base, []LogEntry{{base, n.limit}}),
			encodeLog(rev, base/2, []LogEntry{{base / 4, n.limit - 1}, {base / 2, 1}}))
	}
	return out
}

// nextInstant advances by an edge-relevant step, stays within
// MaxServerMillis and sometimes steps back within the tolerated regression.
func nextInstant(rng *rand.Rand, p ratelimit.Policy, now int64) int64 {
	n := numbersOf(p)
	steps := []int64{0, 1, n.horizon() - 1, n.horizon(), n.horizon() + 1, -n.reg, -1}
	switch n.alg {
	case ratelimit.AlgorithmTokenBucket:
		steps = append(steps, ceilDiv(n.per, n.rate), n.per)
	case ratelimit.AlgorithmGCRA:
		steps = append(steps, ceilDiv(ceilDiv(n.per, n.rate), 1000), ceilDiv(ceilDiv(n.fullScaled, n.rate), 1000))
	default:
		steps = append(steps, n.win-1, n.win)
	}
	next := now + steps[rng.IntN(len(steps))]
	if next < 0 || next > maxSrv || next < now-n.reg {
		return now
	}
	return next
}

func seedMini(t *testing.T, m *mini, key string, st State) {
	t.Helper()
	e := miniEngine{m: m, key: key}
	e.seed(t, st)
}

// TestArgValidationMatchesNewPolicy: at each edge, the program accepts the
// ARGV of a policy NewPolicy accepts and answers INVALID to one NewPolicy
// rejects, so the in-script validation and the contract agree exactly.
func TestArgValidationMatchesNewPolicy(t *testing.T) {
	type edge struct {
		name   string
		alg    ratelimit.Algorithm
		params ratelimit.Params
		cost   int64
		grace  int64
		reg    int64
		rev    int64
	}
	fw := func(limit, win int64) ratelimit.Params { return ratelimit.FixedWindow{Limit: limit, Window: msd(win)} }
	sw := func(limit, win int64) ratelimit.Params {
		return ratelimit.SlidingWindowCounter{Limit: limit, Window: msd(win)}
	}
	tb := func(c, r, per int64) ratelimit.Params {
		return ratelimit.TokenBucket{Capacity: c, RefillTokens: r, RefillPeriod: msd(per)}
	}
	gc := func(rate, per, burst int64) ratelimit.Params {
		return ratelimit.GCRA{Rate: rate, Period: msd(per), Burst: burst}
	}
	sl := func(limit, win int64) ratelimit.Params { return ratelimit.SlidingLog{Limit: limit, Window: msd(win)} }
	FW, SW, TB, GC := ratelimit.AlgorithmFixedWindow, ratelimit.AlgorithmSlidingWindowCounter, ratelimit.AlgorithmTokenBucket, ratelimit.AlgorithmGCRA
	SL, LB := ratelimit.AlgorithmSlidingLog, ratelimit.AlgorithmLeakyBucket
	// A queue's MaxDelay is not sent to the program: the edges give it the
	// longest the contract allows, so only the program's bounds decide.
	lb := func(rate, per, queue, after int64) ratelimit.Params {
		return ratelimit.LeakyBucket{Rate: rate, Period: msd(per), QueueSize: queue, DelayAfter: after, MaxDelay: msd(9_000_000_000_000)}
	}
	edges := []edge{
		{"fixed limit M/2", FW, fw(maxExact/2, 1000), 1, 1, 0, 1},
		{"fixed limit M/2+1", FW, fw(maxExact/2+1, 1000), 1, 1, 0, 1},
		{"fixed window H-grace", FW, fw(5, horizon-1), 1, 1, 0, 1},
		{"fixed window H-grace+1", FW, fw(5, horizon), 1, 1, 0, 1},
		{"fixed grace H-window", FW, fw(5, 1), 1, horizon - 1, 0, 1},
		{"fixed grace H-window+1", FW, fw(5, 1), 1, horizon, 0, 1},
		{"fixed regression H", FW, fw(5, 1), 1, 1, horizon, 1},
		{"fixed revision M", FW, fw(5, 1), 1, 1, 0, maxExact},
		{"fixed revision M+1", FW, fw(5, 1), 1, 1, 0, maxExact + 1},
		{"fixed revision 0", FW, fw(5, 1), 1, 1, 0, 0},
		{"fixed cost limit", FW, fw(5, 1), 5, 1, 0, 1},
		{"sliding limit M/Q", SW, sw(qmax, 1000), 1, 1, 0, 1},
		{"sliding limit M/Q+1", SW, sw(qmax+1, 1000), 1, 1, 0, 1},
		{"sliding window M/Q", SW, sw(5, qmax), 1, 1, 0, 1},
		{"sliding window M/Q+1", SW, sw(5, qmax+1), 1, 1, 0, 1},
		{"sliding 2*window+grace = H", SW, sw(5, qmax), 1, horizon - 2*qmax, 0, 1},
		{"sliding 2*window+grace = H+1", SW, sw(5, qmax), 1, horizon - 2*qmax + 1, 0, 1},
		{"token C*P = M", TB, tb(edgeCapacity, edgeRate, edgePeriod), 1, 1, 0, 1},
		{"token C*P = M+P", TB, tb(edgeCapacity+1, edgeRate, edgePeriod), 1, 1, 0, 1},
		{"token fill+grace = H", TB, tb(1, 1, horizon-1), 1, 1, 0, 1},
		{"token fill+grace = H+1", TB, tb(1, 1, horizon), 1, 1, 0, 1},
		{"token fill just fits", TB, tb(maxExact, edgeRate, 1), 1, 1, 0, 1},
		{"token fill just too long", TB, tb(maxExact, edgeRate-1, 1), 1, 1, 0, 1},
		{"token refill M", TB, tb(1, maxExact, 1), 1, 1, 0, 1},
		{"token refill M+1", TB, tb(1, maxExact+1, 1), 1, 1, 0, 1},
		{"token cost capacity", TB, tb(3, 1, 1), 3, 1, 0, 1},
		{"gcra B*P + 999*R = M", GC, gc(9, 1, 9007199254732), 1, 1, 0, 1},
		{"gcra B*P + 999*R = M + P", GC, gc(9, 1, 9007199254733), 1, 1, 0, 1},
		{"gcra largest rate", GC, gc(9016215470209, 1, 1), 1, 1, 0, 1},
		{"gcra rate above M/999", GC, gc(9016215470213, 1, 1), 1, 1, 0, 1},
		{"gcra horizon + grace = H", GC, gc(1, 1_000_000_000_000, 1), 1, horizon - 1_000_000_000_001, 0, 1},
		{"gcra horizon + grace = H + 1", GC, gc(1, 1_000_000_000_000, 1), 1, horizon - 1_000_000_000_000, 0, 1},
		{"gcra cost burst", GC, gc(3, 1000, 4), 4, 1, 0, 1},
		{"log limit cap", SL, sl(ratelimit.MaxSlidingLogLimit, 1000), 1, 1, 0, 1},
		{"log limit cap+1", SL, sl(ratelimit.MaxSlidingLogLimit+1, 1000), 1, 1, 0, 1},
		{"log window H-grace", SL, sl(5, horizon-1), 1, 1, 0, 1},
		{"log window H-grace+1", SL, sl(5, horizon), 1, 1, 0, 1},
		{"log cost limit", SL, sl(4, 10), 4, 1, 0, 1},
		{"leaky delayAfter = queue", LB, lb(10, 1000, 4, 4), 1, 1, 0, 1},
		{"leaky delayAfter = queue+1", LB, lb(10, 1000, 4, 5), 1, 1, 0, 1},
		{"leaky queue 0", LB, lb(1, 1000, 0, 0), 1, 1, 0, 1},
		{"leaky B*P + 999*R = M", LB, lb(9, 1, 9007199254731, 0), 1, 1, 0, 1},
		{"leaky B*P + 999*R = M + P", LB, lb(9, 1, 9007199254732, 0), 1, 1, 0, 1},
		{"leaky cost queue+1", LB, lb(3, 1000, 3, 0), 4, 1, 0, 1},
	}
	m := newMini(t)
	accepted, rejected := 0, 0
	for i, e := range edges {
		t.Run(e.name, func(t *testing.T) {
			limit := int64(1)
			switch q := e.params.(type) {
			case ratelimit.FixedWindow:
				limit = q.Limit
			case ratelimit.SlidingWindowCounter:
				limit = q.Limit
			case ratelimit.TokenBucket:
				limit = q.Capacity
			case ratelimit.GCRA:
				limit = q.Burst
			case ratelimit.SlidingLog:
				limit = q.Limit
			case ratelimit.LeakyBucket:
				limit = q.QueueSize + 1
			case ratelimit.Concurrency:
				limit = q.Limit
			}
			_, err := ratelimit.NewPolicy(ratelimit.PolicySpec{
				ID: "edge", Revision: e.rev, Algorithm: e.alg, Params: e.params, MaxCost: min(limit, max(e.cost, 1)),
				CleanupGrace: msd(e.grace), MaxClockRegression: msd(e.reg), FailurePolicy: ratelimit.FailClosed,
			})
			// The ARGV the program would get, built by hand: Args needs a
			// valid Policy.
			args := []any{e.rev, e.cost, e.reg, e.grace}
			switch q := e.params.(type) {
			case ratelimit.FixedWindow:
				args = append(args, q.Limit, q.Window.Milliseconds())
			case ratelimit.SlidingWindowCounter:
				args = append(args, q.Limit, q.Window.Milliseconds())
			case ratelimit.TokenBucket:
				args = append(args, q.Capacity, q.RefillTokens, q.RefillPeriod.Milliseconds())
			case ratelimit.GCRA:
				rate, per := q.Emission()
				args = append(args, q.Burst, rate, per)
			case ratelimit.SlidingLog:
				args = append(args, q.Limit, q.Window.Milliseconds())
			case ratelimit.Concurrency:
				args = append(args, q.Limit, q.MaxHold.Milliseconds())
			case ratelimit.LeakyBucket:
				rate, per := ratelimit.GCRA{Rate: q.Rate, Period: q.Period}.Emission()
				args = append(args, q.QueueSize+1, rate, per, q.DelayAfter)
			}
			key := "argedge:" + strconv.Itoa(i)
			v, rerr := m.run(mustProgram(t, e.alg), t0, key, args...)
			require.NoError(t, rerr)
			r := toReply(t, v)
			if err == nil {
				accepted++
				require.Equal(t, StatusAllowed, r.Status, "NewPolicy accepts, so must the program")
			} else {
				rejected++
				require.ErrorIs(t, err, ratelimit.ErrInvalidPolicy)
				require.Equal(t, Reply{Status: StatusInvalid, ServerNowMillis: t0}, r, "NewPolicy rejects (%v), so must the program", err)
				require.False(t, m.srv.Exists(key))
			}
		})
	}
	require.Positive(t, accepted)
	require.Positive(t, rejected)
}
