package ratelimit_test

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

const (
	ms = time.Millisecond
	// maxM is the most whole milliseconds a time.Duration holds.
	maxM = ratelimit.MaxHorizonMillis
	// swcLimitMax and swcWindowMax are the S1 and S2 edges.
	swcLimitMax  = ratelimit.MaxExactInt / ratelimit.WeightScale
	swcWindowMax = ratelimit.MaxExactInt / ratelimit.WeightScale
	// fwLimitMax is the F1 edge.
	fwLimitMax = ratelimit.MaxExactInt / 2
)

func dms(n int64) time.Duration { return time.Duration(n) * ms }

func baseSpec(alg ratelimit.Algorithm, p ratelimit.Params, maxCost int64) ratelimit.PolicySpec {
	return ratelimit.PolicySpec{
		ID: "api", Revision: 1, Algorithm: alg, Params: p, MaxCost: maxCost,
		CleanupGrace: time.Minute, MaxClockRegression: 0, FailurePolicy: ratelimit.FailClosed,
	}
}

func fixedSpec(limit int64, window time.Duration, maxCost int64) ratelimit.PolicySpec {
	return baseSpec(ratelimit.AlgorithmFixedWindow, ratelimit.FixedWindow{Limit: limit, Window: window}, maxCost)
}

func slidingSpec(limit int64, window time.Duration, maxCost int64) ratelimit.PolicySpec {
	return baseSpec(ratelimit.AlgorithmSlidingWindowCounter, ratelimit.SlidingWindowCounter{Limit: limit, Window: window}, maxCost)
}

func bucketSpec(capacity, refill int64, period time.Duration, maxCost int64) ratelimit.PolicySpec {
	return baseSpec(ratelimit.AlgorithmTokenBucket, ratelimit.TokenBucket{Capacity: capacity, RefillTokens: refill, RefillPeriod: period}, maxCost)
}

func gcraSpec(rate int64, period time.Duration, burst, maxCost int64) ratelimit.PolicySpec {
	return baseSpec(ratelimit.AlgorithmGCRA, ratelimit.GCRA{Rate: rate, Period: period, Burst: burst}, maxCost)
}

func logSpec(limit int64, window time.Duration, maxCost int64) ratelimit.PolicySpec {
	return baseSpec(ratelimit.AlgorithmSlidingLog, ratelimit.SlidingLog{Limit: limit, Window: window}, maxCost)
}

func with(s ratelimit.PolicySpec, f func(*ratelimit.PolicySpec)) ratelimit.PolicySpec {
	f(&s)
	return s
}

func withGrace(s ratelimit.PolicySpec, g time.Duration) ratelimit.PolicySpec {
	return with(s, func(s *ratelimit.PolicySpec) { s.CleanupGrace = g })
}

func mustPolicy(t testing.TB, s ratelimit.PolicySpec) ratelimit.Policy {
	t.Helper()
	p, err := ratelimit.NewPolicy(s)
	require.NoError(t, err)
	return p
}

type violation struct {
	field string
	err   error
}

// policyErrors flattens NewPolicy's joined error into its *PolicyErrors.
func policyErrors(t testing.TB, err error) []violation {
	t.Helper()
	j, ok := err.(interface{ Unwrap() []error })
	require.True(t, ok, "NewPolicy returns errors.Join: %T", err)
	var out []violation
	for _, e := range j.Unwrap() {
		var pe *ratelimit.PolicyError
		require.ErrorAs(t, e, &pe)
		out = append(out, violation{pe.Field, pe.Err})
		assert.ErrorIs(t, e, ratelimit.ErrInvalidPolicy)
		assert.ErrorIs(t, e, pe.Err)
		assert.True(t, strings.HasPrefix(e.Error(), "policy "+pe.Field+": "), e.Error())
	}
	return out
}

// TestNewPolicyRejects: each reason alone yields exactly the expected
// *PolicyError (field and sentinel), and the zero Policy.
func TestNewPolicyRejects(t *testing.T) {
	fw := fixedSpec(10, time.Second, 1)
	sw := slidingSpec(10, time.Second, 1)
	tb := bucketSpec(10, 1, time.Second, 1)
	gc := gcraSpec(10, time.Second, 5, 1)
	alg := func(s ratelimit.PolicySpec, a ratelimit.Algorithm) ratelimit.PolicySpec {
		return with(s, func(s *ratelimit.PolicySpec) { s.Algorithm = a })
	}
	params := func(s ratelimit.PolicySpec, p ratelimit.Params) ratelimit.PolicySpec {
		return with(s, func(s *ratelimit.PolicySpec) { s.Params = p })
	}
	tests := []struct {
		name string
		spec ratelimit.PolicySpec
		want []violation
	}{
		// algorithm / params
		{"fixed algorithm, sliding params", alg(sw, ratelimit.AlgorithmFixedWindow), []violation{{"Algorithm", ratelimit.ErrAlgorithmMismatch}}},
		{"sliding algorithm, fixed params", alg(fw, ratelimit.AlgorithmSlidingWindowCounter), []violation{{"Algorithm", ratelimit.ErrAlgorithmMismatch}}},
		{"bucket algorithm, fixed params", alg(fw, ratelimit.AlgorithmTokenBucket), []violation{{"Algorithm", ratelimit.ErrAlgorithmMismatch}}},
		{"fixed algorithm, bucket params", alg(tb, ratelimit.AlgorithmFixedWindow), []violation{{"Algorithm", ratelimit.ErrAlgorithmMismatch}}},
		{"gcra algorithm, bucket params", alg(tb, ratelimit.AlgorithmGCRA), []violation{{"Algorithm", ratelimit.ErrAlgorithmMismatch}}},
		{"bucket algorithm, gcra params", alg(gc, ratelimit.AlgorithmTokenBucket), []violation{{"Algorithm", ratelimit.ErrAlgorithmMismatch}}},
		{"gcra pointer params", params(gc, &ratelimit.GCRA{Rate: 10, Period: time.Second, Burst: 5}), []violation{{"Params", ratelimit.ErrUnsupported}}},
		{"gcra burst 0", gcraSpec(10, time.Second, 0, 1), []violation{{"Params.Burst", ratelimit.ErrNonPositive}, {"MaxCost", ratelimit.ErrMaxCostAboveLimit}}[:1]},
		{"gcra rate 0", gcraSpec(0, time.Second, 5, 1), []violation{{"Params.Rate", ratelimit.ErrNonPositive}}},
		{"gcra period 0", gcraSpec(10, 0, 5, 1), []violation{{"Params.Period", ratelimit.ErrNonPositive}}},
		{"gcra period 1.5ms", gcraSpec(10, 1500*time.Microsecond, 5, 1), []violation{{"Params.Period", ratelimit.ErrNotWholeMillis}}},
		{"gcra max cost above burst", gcraSpec(10, time.Second, 5, 6), []violation{{"MaxCost", ratelimit.ErrMaxCostAboveLimit}}},
		{"sliding log limit 0", logSpec(0, time.Second, 1), []violation{{"Params.Limit", ratelimit.ErrNonPositive}}},
		{"sliding log window 0", logSpec(5, 0, 1), []violation{{"Params.Window", ratelimit.ErrNonPositive}}},
		{"sliding log window 1.5ms", logSpec(5, 1500*time.Microsecond, 1), []violation{{"Params.Window", ratelimit.ErrNotWholeMillis}}},
		{"sliding log max cost above limit", logSpec(5, time.Second, 6), []violation{{"MaxCost", ratelimit.ErrMaxCostAboveLimit}}},
		{"L1 sliding log limit = cap + 1", logSpec(ratelimit.MaxSlidingLogLimit+1, time.Second, 1), []violation{{"Params.Limit", ratelimit.ErrLimitAboveCap}}},
		{"L2 sliding log W + G = H + 1", withGrace(logSpec(5, dms(maxM), 1), ms), []violation{{"Params.Window", ratelimit.ErrArithmeticRange}}},
		{"sliding log algorithm, window params", alg(logSpec(5, time.Second, 1), ratelimit.AlgorithmFixedWindow), []violation{{"Algorithm", ratelimit.ErrAlgorithmMismatch}}},
		{"G1 gcra burst offset + 999 rate = M + 1", gcraSpec(9, ms, 9007199254732+1, 1), []violation{{"Params.Burst", ratelimit.ErrArithmeticRange}}},
		{"G1 gcra 999 * rate > M (rate coprime with 1000 us)", gcraSpec(9016215470213, ms, 1, 1), []violation{{"Params.Rate", ratelimit.ErrArithmeticRange}}},
		{"G2 gcra horizon + G = H + 1", withGrace(gcraSpec(1, dms(1e12), 1, 1), dms(maxM-1e12)), []violation{{"Params.Period", ratelimit.ErrArithmeticRange}}},
		{"zero algorithm", alg(fw, 0), []violation{{"Algorithm", ratelimit.ErrUnsupported}}},
		{"unknown algorithm", alg(fw, 99), []violation{{"Algorithm", ratelimit.ErrUnsupported}}},
		{"nil params", params(fw, nil), []violation{{"Params", ratelimit.ErrAlgorithmMismatch}}},
		{"pointer params", params(fw, &ratelimit.FixedWindow{Limit: 10, Window: time.Second}), []violation{{"Params", ratelimit.ErrUnsupported}}},
		{"nil pointer params", params(fw, (*ratelimit.FixedWindow)(nil)), []violation{{"Params", ratelimit.ErrUnsupported}}},

		// identity
		{"empty id", with(fw, func(s *ratelimit.PolicySpec) { s.ID = "" }), []violation{{"ID", ratelimit.ErrInvalidPolicyID}}},
		{"bad id", with(fw, func(s *ratelimit.PolicySpec) { s.ID = ".API" }), []violation{{"ID", ratelimit.ErrInvalidPolicyID}}},
		{"revision 0", with(fw, func(s *ratelimit.PolicySpec) { s.Revision = 0 }), []violation{{"Revision", ratelimit.ErrNonPositive}}},
		{"revision -1", with(fw, func(s *ratelimit.PolicySpec) { s.Revision = -1 }), []violation{{"Revision", ratelimit.ErrNonPositive}}},
		{"A2 revision MaxExactInt+1", with(fw, func(s *ratelimit.PolicySpec) { s.Revision = ratelimit.MaxExactInt + 1 }), []violation{{"Revision", ratelimit.ErrArithmeticRange}}},

		// non-positive values
		{"max cost 0", with(fw, func(s *ratelimit.PolicySpec) { s.MaxCost = 0 }), []violation{{"MaxCost", ratelimit.ErrNonPositive}}},
		{"max cost -1", with(fw, func(s *ratelimit.PolicySpec) { s.MaxCost = -1 }), []violation{{"MaxCost", ratelimit.ErrNonPositive}}},
		{"fixed limit 0", fixedSpec(0, time.Second, 1), []violation{{"Params.Limit", ratelimit.ErrNonPositive}}},
		{"fixed limit -1", fixedSpec(-1, time.Second, 1), []violation{{"Params.Limit", ratelimit.ErrNonPositive}}},
		{"fixed window 0", fixedSpec(10, 0, 1), []violation{{"Params.Window", ratelimit.ErrNonPositive}}},
		{"fixed window -1ms", fixedSpec(10, -ms, 1), []violation{{"Params.Window", ratelimit.ErrNonPositive}}},
		{"sliding limit 0", slidingSpec(0, time.Second, 1), []violation{{"Params.Limit", ratelimit.ErrNonPositive}}},
		{"sliding window 0", slidingSpec(10, 0, 1), []violation{{"Params.Window", ratelimit.ErrNonPositive}}},
		{"sliding window -1s", slidingSpec(10, -time.Second, 1), []violation{{"Params.Window", ratelimit.ErrNonPositive}}},
		{"bucket capacity 0", bucketSpec(0, 1, time.Second, 1), []violation{{"Params.Capacity", ratelimit.ErrNonPositive}}},
		{"bucket capacity -1", bucketSpec(-1, 1, time.Second, 1), []violation{{"Params.Capacity", ratelimit.ErrNonPositive}}},
		{"bucket refill tokens 0", bucketSpec(10, 0, time.Second, 1), []violation{{"Params.RefillTokens", ratelimit.ErrNonPositive}}},
		{"bucket refill tokens -1", bucketSpec(10, -1, time.Second, 1), []violation{{"Params.RefillTokens", ratelimit.ErrNonPositive}}},
		{"bucket refill period 0", bucketSpec(10, 1, 0, 1), []violation{{"Params.RefillPeriod", ratelimit.ErrNonPositive}}},
		{"bucket refill period -1ms", bucketSpec(10, 1, -ms, 1), []violation{{"Params.RefillPeriod", ratelimit.ErrNonPositive}}},
		{"cleanup grace 0", withGrace(fw, 0), []violation{{"CleanupGrace", ratelimit.ErrNonPositive}}},
		{"cleanup grace -1ms", withGrace(fw, -ms), []violation{{"CleanupGrace", ratelimit.ErrNonPositive}}},
		{"clock regression -1ms", with(fw, func(s *ratelimit.PolicySpec) { s.MaxClockRegression = -ms }), []violation{{"MaxClockRegression", ratelimit.ErrNonPositive}}},

		// sub-millisecond durations
		{"fixed window 999us", fixedSpec(10, 999*time.Microsecond, 1), []violation{{"Params.Window", ratelimit.ErrNotWholeMillis}}},
		{"fixed window 1ms+1ns", fixedSpec(10, ms+1, 1), []violation{{"Params.Window", ratelimit.ErrNotWholeMillis}}},
		{"sliding window 999us", slidingSpec(10, 999*time.Microsecond, 1), []violation{{"Params.Window", ratelimit.ErrNotWholeMillis}}},
		{"sliding window 1.5ms", slidingSpec(10, 1500*time.Microsecond, 1), []violation{{"Params.Window", ratelimit.ErrNotWholeMillis}}},
		{"bucket period 999us", bucketSpec(10, 1, 999*time.Microsecond, 1), []violation{{"Params.RefillPeriod", ratelimit.ErrNotWholeMillis}}},
		{"bucket period 1s+1ns", bucketSpec(10, 1, time.Second+1, 1), []violation{{"Params.RefillPeriod", ratelimit.ErrNotWholeMillis}}},
		{"cleanup grace 999us", withGrace(fw, 999*time.Microsecond), []violation{{"CleanupGrace", ratelimit.ErrNotWholeMillis}}},
		{"cleanup grace 1ns", withGrace(fw, 1), []violation{{"CleanupGrace", ratelimit.ErrNotWholeMillis}}},
		{"clock regression 999us", with(fw, func(s *ratelimit.PolicySpec) { s.MaxClockRegression = 999 * time.Microsecond }), []violation{{"MaxClockRegression", ratelimit.ErrNotWholeMillis}}},
		{"clock regression 1ns", with(fw, func(s *ratelimit.PolicySpec) { s.MaxClockRegression = 1 }), []violation{{"MaxClockRegression", ratelimit.ErrNotWholeMillis}}},
		{"clock regression -1ns", with(fw, func(s *ratelimit.PolicySpec) { s.MaxClockRegression = -1 }), []violation{{"MaxClockRegression", ratelimit.ErrNotWholeMillis}}},

		// max cost above limit
		{"fixed max cost limit+1", fixedSpec(10, time.Second, 11), []violation{{"MaxCost", ratelimit.ErrMaxCostAboveLimit}}},
		{"sliding max cost limit+1", slidingSpec(10, time.Second, 11), []violation{{"MaxCost", ratelimit.ErrMaxCostAboveLimit}}},
		{"bucket max cost capacity+1", bucketSpec(10, 1, time.Second, 11), []violation{{"MaxCost", ratelimit.ErrMaxCostAboveLimit}}},

		// unsupported claims
		{"fail-open", with(fw, func(s *ratelimit.PolicySpec) { s.FailurePolicy = ratelimit.FailOpen }), []violation{{"FailurePolicy", ratelimit.ErrUnsupported}}},
		{"zero failure policy", with(fw, func(s *ratelimit.PolicySpec) { s.FailurePolicy = 0 }), []violation{{"FailurePolicy", ratelimit.ErrUnsupported}}},
		{"unknown failure policy", with(fw, func(s *ratelimit.PolicySpec) { s.FailurePolicy = 7 }), []violation{{"FailurePolicy", ratelimit.ErrUnsupported}}},
		{"dedup window negative", with(fw, func(s *ratelimit.PolicySpec) { s.DedupWindow = -time.Second }), []violation{{"DedupWindow", ratelimit.ErrNonPositive}}},
		{"dedup window sub-millisecond", with(fw, func(s *ratelimit.PolicySpec) { s.DedupWindow = time.Second + 1 }), []violation{{"DedupWindow", ratelimit.ErrNotWholeMillis}}},
		{"dedup window above max", with(fw, func(s *ratelimit.PolicySpec) { s.DedupWindow = ratelimit.MaxDedupWindow + ms }), []violation{{"DedupWindow", ratelimit.ErrDedupWindow}}},
		{"dedup max replays without a window", with(fw, func(s *ratelimit.PolicySpec) { s.DedupMaxReplays = replays(1) }), []violation{{"DedupMaxReplays", ratelimit.ErrUnsupported}}},
		{"dedup max replays 0 without a window", with(fw, func(s *ratelimit.PolicySpec) { s.DedupMaxReplays = replays(0) }), []violation{{"DedupMaxReplays", ratelimit.ErrUnsupported}}},
		{"dedup max replays negative", with(fw, func(s *ratelimit.PolicySpec) { s.DedupWindow = time.Minute; s.DedupMaxReplays = replays(-1) }), []violation{{"DedupMaxReplays", ratelimit.ErrDedupMaxReplays}}},
		{"dedup max replays above max", with(fw, func(s *ratelimit.PolicySpec) {
			s.DedupWindow = time.Minute
			s.DedupMaxReplays = replays(ratelimit.MaxDedupMaxReplays + 1)
		}), []violation{{"DedupMaxReplays", ratelimit.ErrDedupMaxReplays}}},

		// arithmetic bounds, each just outside (docs/arithmetic.md)
		{"F1 fixed limit MaxExactInt/2+1", fixedSpec(fwLimitMax+1, time.Second, 1), []violation{{"Params.Limit", ratelimit.ErrArithmeticRange}}},
		{"F1 fixed limit MaxInt64", fixedSpec(math.MaxInt64, time.Second, 1), []violation{{"Params.Limit", ratelimit.ErrArithmeticRange}}},
		{"F2 fixed W+G = horizon+1", withGrace(fixedSpec(10, dms(maxM/2+1), 1), dms(maxM-maxM/2)), []violation{{"Params.Window", ratelimit.ErrArithmeticRange}}},
		{"F2 fixed max W and G", withGrace(fixedSpec(10, dms(maxM), 1), dms(maxM)), []violation{{"Params.Window", ratelimit.ErrArithmeticRange}}},
		{"S1 sliding limit MaxExactInt/1e6+1", slidingSpec(swcLimitMax+1, time.Second, 1), []violation{{"Params.Limit", ratelimit.ErrArithmeticRange}}},
		{"S2 sliding window MaxExactInt/1e6+1 ms", slidingSpec(10, dms(swcWindowMax+1), 1), []violation{{"Params.Window", ratelimit.ErrArithmeticRange}}},
		{"S3 sliding 2W+G = horizon+1", withGrace(slidingSpec(10, dms(swcWindowMax), 1), dms(maxM-2*swcWindowMax+1)), []violation{{"Params.Window", ratelimit.ErrArithmeticRange}}},
		{"T1 capacity*period = 2^53", bucketSpec(1<<52, 1<<40+1, 2*ms, 1), []violation{{"Params.Capacity", ratelimit.ErrArithmeticRange}}},
		{"T1 capacity*period = MaxExactInt+1 (odd period)", bucketSpec(ratelimit.MaxExactInt/7+1, 1<<40, 7*ms, 1), []violation{{"Params.Capacity", ratelimit.ErrArithmeticRange}}},
		{"T1 capacity*period overflows int64", bucketSpec(math.MaxInt64, 1, dms(maxM), 1), []violation{{"Params.Capacity", ratelimit.ErrArithmeticRange}}},
		{"T1 refill tokens MaxExactInt+1", bucketSpec(10, ratelimit.MaxExactInt+1, ms, 1), []violation{{"Params.RefillTokens", ratelimit.ErrArithmeticRange}}},
		{"T2 fill+G = horizon+1", withGrace(bucketSpec(maxM, 1, ms, 1), ms), []violation{{"Params.RefillPeriod", ratelimit.ErrArithmeticRange}}},
		// ceil(3*1/2) = 2, so with G = horizon-1 the sum is horizon+1; a
		// floor division would wrongly accept it.
		{"T2 uses the ceiling of C*P/R", withGrace(bucketSpec(3, 2, ms, 1), dms(maxM-1)), []violation{{"Params.RefillPeriod", ratelimit.ErrArithmeticRange}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := ratelimit.NewPolicy(tt.spec)
			require.Error(t, err)
			assert.True(t, p.IsZero(), "a rejected spec yields the zero Policy")
			assert.ErrorIs(t, err, ratelimit.ErrInvalidPolicy)
			assert.ElementsMatch(t, tt.want, policyErrors(t, err))
			assert.False(t, oracleAccepts(tt.spec), "the oracle disagrees")
			for _, v := range tt.want {
				if v.err == ratelimit.ErrArithmeticRange {
					// The worst-case list covers this bound: the rejected
					// numbers would overflow some intermediate.
					assert.NotEmpty(t, exceeded(shapeOfSpec(tt.spec)), "no intermediate exceeds its bound")
				}
			}
		})
	}
}

// TestNewPolicyJoinsEveryViolation: the zero spec reports every field.
func TestNewPolicyJoinsEveryViolation(t *testing.T) {
	_, err := ratelimit.NewPolicy(ratelimit.PolicySpec{DedupWindow: -1, DedupMaxReplays: replays(17), FailurePolicy: ratelimit.FailOpen})
	require.Error(t, err)
	var fields []string
	for _, v := range policyErrors(t, err) {
		fields = append(fields, v.field)
	}
	assert.ElementsMatch(t, []string{"ID", "Revision", "CleanupGrace", "FailurePolicy", "DedupWindow", "DedupMaxReplays", "MaxCost", "Algorithm", "Params"}, fields)
}

// TestNewPolicyAcceptsExtremes: the largest values just inside every bound
// are accepted, and for each the math/big worst case of every intermediate
// of its algorithm is <= 2^53-1 (offsets <= MaxHorizonMillis).
func TestNewPolicyAcceptsExtremes(t *testing.T) {
	// 2^53-1 = 6361 * 69431 * 20394401: a capacity*period exactly at T1.
	const t1Capacity, t1Period = 69431 * 20394401, 6361
	require.Equal(t, ratelimit.MaxExactInt, int64(t1Capacity)*t1Period)
	tests := []struct {
		name string
		spec ratelimit.PolicySpec
	}{
		{"smallest fixed", withGrace(fixedSpec(1, ms, 1), ms)},
		{"smallest sliding", withGrace(slidingSpec(1, ms, 1), ms)},
		{"smallest bucket", withGrace(bucketSpec(1, 1, ms, 1), ms)},
		{"golden-vector style, regression 0", fixedSpec(5, time.Second, 5)},
		{"id 64 chars", with(fixedSpec(5, time.Second, 5), func(s *ratelimit.PolicySpec) { s.ID = ratelimit.PolicyID(strings.Repeat("z", 64)) })},
		{"A2 revision MaxExactInt", with(fixedSpec(5, time.Second, 5), func(s *ratelimit.PolicySpec) { s.Revision = ratelimit.MaxExactInt })},
		{"A3 regression longest duration", with(fixedSpec(5, time.Second, 5), func(s *ratelimit.PolicySpec) { s.MaxClockRegression = dms(maxM) })},
		{"F1 fixed limit MaxExactInt/2, max cost = limit", fixedSpec(fwLimitMax, time.Second, fwLimitMax)},
		{"F2 fixed W+G = horizon", withGrace(fixedSpec(10, dms(maxM/2), 10), dms(maxM-maxM/2))},
		{"F2 fixed W = horizon-1ms", withGrace(fixedSpec(10, dms(maxM-1), 10), ms)},
		{"F1+F2 together", withGrace(fixedSpec(fwLimitMax, dms(maxM-1), fwLimitMax), ms)},
		{"S1 sliding limit MaxExactInt/1e6", slidingSpec(swcLimitMax, time.Second, swcLimitMax)},
		{"S2 sliding window MaxExactInt/1e6 ms", slidingSpec(10, dms(swcWindowMax), 10)},
		{"S1+S2+S3 sliding 2W+G = horizon", withGrace(slidingSpec(swcLimitMax, dms(swcWindowMax), swcLimitMax), dms(maxM-2*swcWindowMax))},
		{"T1 capacity*period = MaxExactInt", bucketSpec(t1Capacity, 1<<20, t1Period*ms, t1Capacity)},
		{"T1 capacity*period = MaxExactInt, G max", withGrace(bucketSpec(t1Capacity, 1<<20, t1Period*ms, 1), dms(maxM-ratelimit.MaxExactInt/(1<<20)-1))},
		{"T1 refill tokens MaxExactInt", bucketSpec(1, ratelimit.MaxExactInt, ms, 1)},
		{"T2 fill+G = horizon", withGrace(bucketSpec(maxM-1, 1, ms, maxM-1), ms)},
		{"T2 ceiling edge", withGrace(bucketSpec(3, 2, ms, 3), dms(maxM-2))},
		{"smallest gcra", withGrace(gcraSpec(1, ms, 1, 1), ms)},
		{"redis_rate PerSecond(10) with burst 20", gcraSpec(10, time.Second, 20, 20)},
		{"G1 gcra B*P' + 999*R' = MaxExactInt", gcraSpec(9, ms, 9007199254732, 9007199254732)},
		{"G1 gcra largest rate coprime with 1000 us", gcraSpec(9016215470209, ms, 1, 1)},
		{"G2 gcra horizon + G = horizon", withGrace(gcraSpec(1, dms(1e12), 1, 1), dms(maxM-1e12-1))},
		{"smallest sliding log", withGrace(logSpec(1, ms, 1), ms)},
		{"L1 sliding log limit = cap", logSpec(ratelimit.MaxSlidingLogLimit, time.Hour, ratelimit.MaxSlidingLogLimit)},
		{"L2 sliding log W + G = horizon", withGrace(logSpec(100, dms(maxM-1), 1), ms)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.True(t, oracleAccepts(tt.spec), "the oracle rejects the case itself")
			p := mustPolicy(t, tt.spec)
			assert.False(t, p.IsZero())
			assert.Equal(t, tt.spec.ID, p.ID())
			assert.Equal(t, tt.spec.Revision, p.Revision())
			assert.Equal(t, tt.spec.Algorithm, p.Algorithm())
			assert.Equal(t, tt.spec.Params, p.Params())
			assert.Equal(t, tt.spec.MaxCost, p.MaxCost())
			assert.Equal(t, tt.spec.CleanupGrace, p.CleanupGrace())
			assert.Equal(t, tt.spec.MaxClockRegression, p.MaxClockRegression())
			assert.Equal(t, ratelimit.FailClosed, p.FailurePolicy())
			requireWorstCaseFits(t, p)
		})
	}
}
