package ratelimit

import (
	"math"
	"time"
)

// TokenBucket holds at most Capacity tokens, starts full and gains
// RefillTokens every RefillPeriod, accrued exactly (sub-token remainders are
// kept), independently of how often it is evaluated.
type TokenBucket struct {
	Capacity     int64
	RefillTokens int64
	RefillPeriod time.Duration
}

var tokenBucketSpec = register[TokenBucket](AlgorithmSpec{
	Algorithm: AlgorithmTokenBucket,
	Name:      "token_bucket",
	fields: []ParamField{
		{Name: "capacity", Kind: FieldInt}, {Name: "refillTokens", Kind: FieldInt}, {Name: "refillPeriod", Kind: FieldDuration},
	},
	Build: func(v FieldValues) Params {
		return TokenBucket{Capacity: v.Ints["capacity"], RefillTokens: v.Ints["refillTokens"], RefillPeriod: v.Durations["refillPeriod"]}
	},
	Certainty: Certain,
	// The level grows at the refill rate; retry = ceil((need-s)/R) is the
	// first millisecond the level reaches need.
	DenialCacheExact: true,
	Charge:           true,
	LeaseRecords:     true,
	Refund:           true,
})

// Algorithm implements Params.
func (TokenBucket) Algorithm() Algorithm { return AlgorithmTokenBucket }

func (q TokenBucket) limit() int64 { return q.Capacity }

// windowMillis of a token bucket is its time to fill from empty,
// ceil(Capacity * RefillPeriod / RefillTokens) ms (T2 of docs/arithmetic.md;
// NewPolicy guarantees the product fits).
func (q TokenBucket) windowMillis() int64 {
	return ceilDiv(q.Capacity*q.RefillPeriod.Milliseconds(), q.RefillTokens)
}

// horizonMillis: a bucket is full at most one fill time away (T2).
func (q TokenBucket) horizonMillis() int64 { return q.windowMillis() }

// validate checks formulas T1-T2 of docs/arithmetic.md on the reduced
// rate: RefillTokens and RefillPeriod (in ms) divided by their greatest
// common divisor, so that the identical rates "1e9 per 24h" and "625 per
// 54ms" get the same answer. It keeps q itself when q already satisfies T1
// (state written by earlier versions keeps its unit, 1/P tokens), the
// reduced form otherwise.
func (q TokenBucket) validate(v *policyValidator, grace int64) (int64, variant) {
	v.positive("Params.Capacity", q.Capacity)
	v.positive("Params.RefillTokens", q.RefillTokens)
	period := v.millis("Params.RefillPeriod", q.RefillPeriod, false)
	if q.Capacity <= 0 || q.RefillTokens <= 0 || period <= 0 {
		return q.Capacity, q
	}
	g := gcd(q.RefillTokens, period)
	rate, per := q.RefillTokens/g, period/g
	// T1: the refill rate travels to the program as an exact integer.
	if rate > MaxExactInt {
		v.fail("Params.RefillTokens", ErrArithmeticRange, "%d (reduced rate %d per %d ms) > %d", q.RefillTokens, rate, per, MaxExactInt)
	}
	// T1: the scaled full level capacity * period bounds every scaled token
	// intermediate.
	if !mulFits(q.Capacity, per) {
		v.fail("Params.Capacity", ErrArithmeticRange, "capacity %d * refill period %d ms (reduced rate %d per %d ms) > %d", q.Capacity, per, rate, per, MaxExactInt)
		return q.Capacity, q
	}
	// T2: time to fill from empty (bounds retry and reset offset) plus grace
	// (the TTL) <= MaxHorizonMillis. C*P/R is the same for both forms.
	reduced := TokenBucket{Capacity: q.Capacity, RefillTokens: rate, RefillPeriod: time.Duration(per) * time.Millisecond}
	fill := reduced.windowMillis()
	v.sumWithin("Params.RefillPeriod", fill, grace, MaxHorizonMillis)
	if q.RefillTokens <= MaxExactInt && mulFits(q.Capacity, period) {
		return q.Capacity, q
	}
	return q.Capacity, reduced
}

// fallbackShares: the share as the capacity and the rate divided by n,
// first as the period multiplied by n (when that is in range), then as
// the refill tokens divided by n, rounded down, at least 1.
func (q TokenBucket) fallbackShares(share, n int64) ([]Params, error) {
	var out []Params
	if q.RefillPeriod > 0 && n <= math.MaxInt64/int64(q.RefillPeriod) {
		out = append(out, TokenBucket{Capacity: share, RefillTokens: q.RefillTokens, RefillPeriod: q.RefillPeriod * time.Duration(n)})
	}
	return append(out, TokenBucket{Capacity: share, RefillTokens: max(1, q.RefillTokens/n), RefillPeriod: q.RefillPeriod}), nil
}

func (TokenBucket) sealedParams() {}
