package ratelimit_test

import (
	"math/big"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// This file is the test oracle for docs/arithmetic.md: the bound formulas and
// the worst-case intermediates of each algorithm, computed with math/big so
// that the oracle itself cannot overflow.

var (
	bigMaxExact = big.NewInt(ratelimit.MaxExactInt)
	bigHorizon  = big.NewInt(ratelimit.MaxHorizonMillis)
	bigScale    = big.NewInt(ratelimit.WeightScale)
	bigNow      = big.NewInt(ratelimit.MaxServerMillis) // the latest accepted server time
	policyIDRe  = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)
)

func bi(n int64) *big.Int { return big.NewInt(n) }

func add(xs ...*big.Int) *big.Int {
	s := new(big.Int)
	for _, x := range xs {
		s.Add(s, x)
	}
	return s
}

func mul(xs ...*big.Int) *big.Int {
	p := big.NewInt(1)
	for _, x := range xs {
		p.Mul(p, x)
	}
	return p
}

// ceilQuo is ceil(a/b) for a >= 0, b > 0.
func ceilQuo(a, b *big.Int) *big.Int {
	q, r := new(big.Int).QuoRem(a, b, new(big.Int))
	if r.Sign() != 0 {
		q.Add(q, big.NewInt(1))
	}
	return q
}

// windowEnd is (floor(now/w)+j)*w: the start of the current window (j=0),
// its end (j=1) or the end of the next one (j=2) at server time now.
func windowEnd(now, w *big.Int, j int64) *big.Int {
	if w.Sign() <= 0 {
		return new(big.Int) // not a window; NewPolicy rejects it anyway
	}
	k := new(big.Int).Quo(now, w)
	return mul(add(k, bi(j)), w)
}

// intermediate is one worst-case value of docs/arithmetic.md and the bound it
// must respect (MaxExactInt for values and instants, MaxHorizonMillis for
// offsets, which must also be representable as a time.Duration).
type intermediate struct {
	formula string
	value   *big.Int
	max     *big.Int
}

// shape is the raw numbers of a policy, valid or not, in milliseconds.
type shape struct {
	alg                           ratelimit.Algorithm
	limit, window                 int64 // fixed window, sliding counter, sliding log
	capacity, refill, period      int64 // token bucket
	burst, rate, periodMicros     int64 // GCRA, as written (not reduced)
	maxCost, grace, reg, revision int64
}

func shapeOf(p ratelimit.Policy) shape {
	sh := shape{alg: p.Algorithm(), maxCost: p.MaxCost(), grace: p.CleanupGrace().Milliseconds(),
		reg: p.MaxClockRegression().Milliseconds(), revision: p.Revision()}
	return withParams(sh, p.Params())
}

func shapeOfSpec(s ratelimit.PolicySpec) shape {
	sh := shape{alg: s.Algorithm, maxCost: s.MaxCost, grace: s.CleanupGrace.Milliseconds(),
		reg: s.MaxClockRegression.Milliseconds(), revision: s.Revision}
	return withParams(sh, s.Params)
}

func withParams(sh shape, p ratelimit.Params) shape {
	switch q := p.(type) {
	case ratelimit.FixedWindow:
		sh.limit, sh.window = q.Limit, q.Window.Milliseconds()
	case ratelimit.SlidingWindowCounter:
		sh.limit, sh.window = q.Limit, q.Window.Milliseconds()
	case ratelimit.TokenBucket:
		sh.capacity, sh.refill, sh.period = q.Capacity, q.RefillTokens, q.RefillPeriod.Milliseconds()
	case ratelimit.GCRA:
		sh.burst, sh.rate, sh.periodMicros = q.Burst, q.Rate, q.Period.Microseconds()
	case ratelimit.SlidingLog:
		sh.limit, sh.window = q.Limit, q.Window.Milliseconds()
	case ratelimit.Concurrency:
		sh.limit, sh.window = q.Limit, q.MaxHold.Milliseconds()
	case ratelimit.LeakyBucket:
		// GCRA's numbers with a burst of QueueSize+1 (ADR 0028).
		sh.burst, sh.rate, sh.periodMicros = q.QueueSize+1, q.Rate, q.Period.Microseconds()
	}
	return sh
}

// worstCase lists the largest value each intermediate of the shape's
// algorithm can take (docs/arithmetic.md, "Worst-case intermediates"), with
// server time at MaxServerMillis, stored counts at the limit and a cost at
// the limit: a program checks cost <= limit itself (A4), so the bounds may
// not rely on MaxCost being smaller.
func worstCase(sh shape) []intermediate {
	g, reg, maxCost := bi(sh.grace), bi(sh.reg), bi(sh.maxCost)
	out := []intermediate{
		{"A1 now + horizon", add(bigNow, bigHorizon), bigMaxExact},
		{"A2 revision", bi(sh.revision), bigMaxExact},
		{"A3 regression", reg, bigHorizon},
		{"A3 now + regression", add(bigNow, reg), bigMaxExact},
	}
	switch sh.alg {
	case ratelimit.AlgorithmFixedWindow:
		l, w := bi(sh.limit), bi(sh.window)
		out = append(out,
			intermediate{"A4 cost", maxCost, l},
			intermediate{"F1 used + cost", add(l, l), bigMaxExact},
			intermediate{"F2 k*W <= eff", windowEnd(bigNow, w, 0), bigMaxExact},
			intermediate{"F2 window end (k+1)*W", windowEnd(bigNow, w, 1), bigMaxExact},
			intermediate{"F2 retry end - eff", w, bigHorizon},
			intermediate{"F2 W + G", add(w, g), bigHorizon},
			// The TTL is set from server time: (end - now) + G, and now
			// may trail eff by up to the regression.
			intermediate{"F2 ttl (end - now) + G", add(w, reg, g), bigMaxExact},
			intermediate{"F2 expire-at eff + W + G", add(bigNow, w, g), bigMaxExact},
		)
	case ratelimit.AlgorithmSlidingWindowCounter:
		l, w := bi(sh.limit), bi(sh.window)
		out = append(out,
			intermediate{"A4 cost", maxCost, l},
			intermediate{"S2 k*W <= eff", windowEnd(bigNow, w, 0), bigMaxExact},
			intermediate{"S2 (W - e) * scale", mul(w, bigScale), bigMaxExact},
			intermediate{"S1 p * w", mul(l, bigScale), bigMaxExact},
			intermediate{"S1 estimate + cost", add(l, l, l), bigMaxExact},
			intermediate{"S1 budget * scale", mul(l, bigScale), bigMaxExact},
			// The retry threshold is clamped to WeightScale.
			intermediate{"S2 threshold * W", mul(bigScale, w), bigMaxExact},
			intermediate{"S3 reset (k+2)*W", windowEnd(bigNow, w, 2), bigMaxExact},
			intermediate{"S3 retry", mul(bi(2), w), bigHorizon},
			intermediate{"S3 2W + G", add(w, w, g), bigHorizon},
			intermediate{"S3 ttl (reset - now) + G", add(w, w, reg, g), bigMaxExact},
			intermediate{"S3 expire-at eff + 2W + G", add(bigNow, w, w, g), bigMaxExact},
		)
	case ratelimit.AlgorithmTokenBucket:
		c, r, per := bi(sh.capacity), bi(sh.refill), bi(sh.period)
		full := mul(c, per)
		fill := new(big.Int)
		if r.Sign() > 0 {
			fill = ceilQuo(full, r)
		}
		out = append(out,
			intermediate{"A4 cost", maxCost, c},
			intermediate{"T1 full scaled level C*P", full, bigMaxExact},
			intermediate{"T1 cost * P", mul(c, per), bigMaxExact},
			intermediate{"T1 refill rate R", r, bigMaxExact},
			// elapsed*R is formed only when elapsed < ceil(D/R), so
			// S + elapsed*R < S + D = C*P.
			intermediate{"T1 S + elapsed*R", full, bigMaxExact},
			// ceil(a/b) is formed as q = floor(a/b), then a - q*b: q*b <= a.
			intermediate{"T1 q*R in ceil", full, bigMaxExact},
			intermediate{"T2 fill time ceil(C*P/R) (retry, reset offset)", fill, bigHorizon},
			intermediate{"T2 fill + G", add(fill, g), bigHorizon},
			intermediate{"T2 ttl (reset - now) + G", add(fill, reg, g), bigMaxExact},
			intermediate{"T2 expire-at eff + fill + G", add(bigNow, fill, g), bigMaxExact},
		)
	case ratelimit.AlgorithmGCRA, ratelimit.AlgorithmLeakyBucket:
		b, r, per := gcraReduced(sh)
		bp := mul(b, per)
		// The stored offset d = (TAT - l*1000 us) * R' is at most B*P' plus
		// 999 us of the effective millisecond, scaled.
		d := add(bp, mul(bi(999), r))
		full := new(big.Int) // ceil(B*P'/R') us: the time to full
		if r.Sign() > 0 {
			full = ceilQuo(bp, r)
		}
		// The horizon: ceil((999 + full) / 1000) ms <= full ms + 1.
		horizon := add(ceilQuo(full, bi(1000)), bi(1))
		out = append(out,
			intermediate{"A4 cost", maxCost, b},
			intermediate{"G1 rate R'", r, bigMaxExact},
			intermediate{"G1 999 * R'", mul(bi(999), r), bigMaxExact},
			intermediate{"G1 burst offset B*P'", bp, bigMaxExact},
			intermediate{"G1 cost * P'", mul(b, per), bigMaxExact},
			intermediate{"G1 stored offset d <= B*P' + 999*R'", d, bigMaxExact},
			// elapsed*R' is formed only when it is below d.
			intermediate{"G1 delta * R'", d, bigMaxExact},
			intermediate{"G1 q*R' in ceil", d, bigMaxExact},
			// e*1000 is formed only when e < ceil(ceil(d/R')/1000).
			intermediate{"G1 e * 1000", add(ceilQuo(d, maxOne(r)), bi(999)), bigMaxExact},
			intermediate{"G2 horizon (retry, reset offset)", horizon, bigHorizon},
			intermediate{"G2 horizon + G", add(horizon, g), bigHorizon},
			intermediate{"G2 ttl (reset - now) + G", add(horizon, reg, g), bigMaxExact},
			intermediate{"G2 expire-at eff + horizon + G", add(bigNow, horizon, g), bigMaxExact},
		)
	case ratelimit.AlgorithmSlidingLog:
		l, w := bi(sh.limit), bi(sh.window)
		out = append(out,
			intermediate{"A4 cost", maxCost, l},
			intermediate{"L1 limit (entries per subject)", l, bi(ratelimit.MaxSlidingLogLimit)},
			intermediate{"L1 sum + cost", add(l, l), bigMaxExact},
			// An entry's instant is at most eff; it leaves at t + W.
			intermediate{"L2 reset newest + W", add(bigNow, w), bigMaxExact},
			intermediate{"L2 retry t + W - eff", w, bigHorizon},
			intermediate{"L2 W + G", add(w, g), bigHorizon},
			intermediate{"L2 ttl (reset - now) + G", add(w, reg, g), bigMaxExact},
			intermediate{"L2 expire-at eff + W + G", add(bigNow, w, g), bigMaxExact},
		)
	}
	return out
}

// gcraReduced returns the shape's burst B and its emission interval as the
// reduced fraction P'/R' of microseconds.
func gcraReduced(sh shape) (b, r, per *big.Int) {
	r, per = bi(sh.rate), bi(sh.periodMicros)
	if sh.rate > 0 && sh.periodMicros > 0 {
		d := new(big.Int).GCD(nil, nil, r, per)
		r, per = new(big.Int).Quo(r, d), new(big.Int).Quo(per, d)
	}
	return bi(sh.burst), r, per
}

// maxOne is x, or 1 when x < 1 (a divisor for shapes NewPolicy rejects).
func maxOne(x *big.Int) *big.Int {
	if x.Sign() <= 0 {
		return bi(1)
	}
	return x
}

// exceeded returns the formulas of sh whose worst case is out of bounds.
func exceeded(sh shape) []string {
	var out []string
	for _, im := range worstCase(sh) {
		if im.value.Cmp(im.max) > 0 || im.value.Sign() < 0 {
			out = append(out, im.formula+" = "+im.value.String()+" > "+im.max.String())
		}
	}
	return out
}

// requireWorstCaseFits fails unless every worst-case intermediate of p is
// within its bound.
func requireWorstCaseFits(t testing.TB, p ratelimit.Policy) {
	t.Helper()
	require.Empty(t, exceeded(shapeOf(p)), "policy %v", p)
	require.Greater(t, len(worstCase(shapeOf(p))), 5, "no algorithm intermediates listed")
}

// wholeMillis returns d in milliseconds and whether it is whole and >= min.
func wholeMillis(d time.Duration, minMs int64) (*big.Int, bool) {
	if d%time.Millisecond != 0 || d.Milliseconds() < minMs {
		return nil, false
	}
	return bi(d.Milliseconds()), true
}

// oracleAccepts is the reference predicate for NewPolicy written from
// docs/contract.md section 2 and the formulas of docs/arithmetic.md in math/big.
func oracleAccepts(s ratelimit.PolicySpec) bool {
	if !policyIDRe.MatchString(string(s.ID)) || s.Revision < 1 || s.Revision > ratelimit.MaxExactInt {
		return false
	}
	if s.FailurePolicy != ratelimit.FailClosed || s.MaxCost < 1 {
		return false
	}
	if s.DedupWindow != 0 && (s.DedupWindow%time.Millisecond != 0 || s.DedupWindow < time.Millisecond || s.DedupWindow > 24*time.Hour) {
		return false
	}
	if r := s.DedupMaxReplays; r != nil && (s.DedupWindow == 0 || *r < 0 || *r > 16) {
		return false
	}
	g, ok := wholeMillis(s.CleanupGrace, 1)
	if !ok {
		return false
	}
	if _, ok := wholeMillis(s.MaxClockRegression, 0); !ok {
		return false
	}
	le := func(a, b *big.Int) bool { return a.Cmp(b) <= 0 }
	switch q := s.Params.(type) {
	case ratelimit.FixedWindow:
		w, ok := wholeMillis(q.Window, 1)
		return ok && s.Algorithm == ratelimit.AlgorithmFixedWindow && q.Limit >= 1 && s.MaxCost <= q.Limit &&
			le(mul(bi(2), bi(q.Limit)), bigMaxExact) && // F1
			le(add(w, g), bigHorizon) // F2
	case ratelimit.SlidingWindowCounter:
		w, ok := wholeMillis(q.Window, 1)
		return ok && s.Algorithm == ratelimit.AlgorithmSlidingWindowCounter && q.Limit >= 1 && s.MaxCost <= q.Limit &&
			le(mul(bi(q.Limit), bigScale), bigMaxExact) && // S1
			le(mul(w, bigScale), bigMaxExact) && // S2
			le(add(w, w, g), bigHorizon) // S3
	case ratelimit.TokenBucket:
		per, ok := wholeMillis(q.RefillPeriod, 1)
		if !ok || s.Algorithm != ratelimit.AlgorithmTokenBucket || q.Capacity < 1 || q.RefillTokens < 1 || s.MaxCost > q.Capacity {
			return false
		}
		// T1 and T2 hold for the rate reduced by gcd(R, P): the identical
		// rate the programs then receive.
		r := bi(q.RefillTokens)
		d := new(big.Int).GCD(nil, nil, r, per)
		r, per = new(big.Int).Quo(r, d), new(big.Int).Quo(per, d)
		full := mul(bi(q.Capacity), per)
		return le(full, bigMaxExact) && le(r, bigMaxExact) && // T1
			le(add(ceilQuo(full, r), g), bigHorizon) // T2
	case ratelimit.GCRA:
		if _, ok := wholeMillis(q.Period, 1); !ok || s.Algorithm != ratelimit.AlgorithmGCRA || q.Burst < 1 || q.Rate < 1 || s.MaxCost > q.Burst {
			return false
		}
		// G1 and G2 on the emission interval Period/Rate in microseconds,
		// reduced by gcd(P, R): the numbers the programs receive.
		b, r, per := gcraReduced(shape{burst: q.Burst, rate: q.Rate, periodMicros: q.Period.Microseconds()})
		bp := mul(b, per)
		full := ceilQuo(bp, r)
		return le(add(bp, mul(bi(999), r)), bigMaxExact) && // G1
			le(add(ceilQuo(full, bi(1000)), bi(1), g), bigHorizon) // G2
	case ratelimit.LeakyBucket:
		// Q1 (docs/arithmetic.md), then GCRA's G1 and G2 with a burst of
		// QueueSize+1; no dedup window (ADR 0028).
		maxDelay, ok := wholeMillis(q.MaxDelay, 0)
		if !ok || s.Algorithm != ratelimit.AlgorithmLeakyBucket || s.DedupWindow != 0 || q.QueueSize < 0 ||
			q.QueueSize >= ratelimit.MaxExactInt || q.DelayAfter < 0 || q.DelayAfter > q.QueueSize {
			return false
		}
		if _, ok := wholeMillis(q.Period, 1); !ok || q.Rate < 1 || s.MaxCost > q.QueueSize+1 {
			return false
		}
		b, r, per := gcraReduced(shape{burst: q.QueueSize + 1, rate: q.Rate, periodMicros: q.Period.Microseconds()})
		bp := mul(b, per)
		if !le(add(bp, mul(bi(999), r)), bigMaxExact) || !le(add(ceilQuo(ceilQuo(bp, r), bi(1000)), bi(1), g), bigHorizon) {
			return false
		}
		longest := ceilQuo(ceilQuo(mul(bi(q.QueueSize-q.DelayAfter), per), r), bi(1000))
		return le(longest, maxDelay) // Q1
	case ratelimit.SlidingLog:
		w, ok := wholeMillis(q.Window, 1)
		return ok && s.Algorithm == ratelimit.AlgorithmSlidingLog && q.Limit >= 1 && s.MaxCost <= q.Limit &&
			q.Limit <= ratelimit.MaxSlidingLogLimit && // L1
			le(add(w, g), bigHorizon) // L2
	case ratelimit.Concurrency:
		// C1-C2: the sliding log's bounds with maxHold as the window; no
		// dedup window and no shadow (ADR 0041).
		w, ok := wholeMillis(q.MaxHold, 1)
		return ok && s.Algorithm == ratelimit.AlgorithmConcurrency && q.Limit >= 1 && s.MaxCost <= q.Limit &&
			s.DedupWindow == 0 && s.Enforcement != ratelimit.Shadow &&
			q.Limit <= ratelimit.MaxConcurrencyLimit && // C1
			le(add(w, g), bigHorizon) // C2
	}
	return false
}
