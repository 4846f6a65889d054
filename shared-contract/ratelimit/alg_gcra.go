package ratelimit

import (
	"math"
	"time"
)

// GCRA admits Rate requests per Period on average and at most Burst at once
// from an empty state: the generic cell rate algorithm as
// go-redis/redis_rate defines it (redis_rate.Limit{Rate, Burst, Period} is
// GCRA{Rate, Period, Burst}; ADR 0021). The emission interval Period/Rate is
// kept exactly (the programs carry its remainder), in microseconds of the
// server clock. A cost above Burst can never be admitted, so MaxCost is at
// most Burst and a larger Request.Cost is refused (ErrCostAboveMaxCost).
type GCRA struct {
	Rate   int64
	Period time.Duration
	Burst  int64
}

var gcraSpec = register[GCRA](AlgorithmSpec{
	Algorithm: AlgorithmGCRA,
	Name:      "gcra",
	// redis_rate.Limit{Rate, Burst, Period} (ADR 0021).
	fields: []ParamField{{Name: "rate", Kind: FieldInt}, {Name: "period", Kind: FieldDuration}, {Name: "burst", Kind: FieldInt}},
	Build: func(v FieldValues) Params {
		return GCRA{Rate: v.Ints["rate"], Period: v.Durations["period"], Burst: v.Ints["burst"]}
	},
	Certainty: Certain,
	// A denial writes nothing and TAT only moves later with traffic; retry
	// is the first whole millisecond at any microsecond of which the cost
	// is admitted, and a larger cost needs a later one. GCRA decides to the
	// microsecond: the denial cache's entries keep a 2 ms margin (ADR 0021).
	DenialCacheExact: true,
	DecidesInMicros:  true,
	Charge:           true,
	LeaseRecords:     true,
	Refund:           true,
})

// Algorithm implements Params.
func (GCRA) Algorithm() Algorithm { return AlgorithmGCRA }

// gcra implements emitter: GCRA runs on itself.
func (q GCRA) gcra() GCRA { return q }

func (q GCRA) limit() int64 { return q.Burst }

// Emission returns the emission interval Period/Rate as the reduced
// fraction periodMicros/rate of microseconds (numerator and denominator
// divided by their greatest common divisor): the numbers the programs
// receive (G1 of docs/arithmetic.md). Both are 0 unless Rate >= 1 and
// Period is at least 1 microsecond.
func (q GCRA) Emission() (rate, periodMicros int64) {
	us := q.Period.Microseconds()
	if q.Rate < 1 || us < 1 {
		return 0, 0
	}
	g := gcd(q.Rate, us)
	return q.Rate / g, us / g
}

// windowMillis of GCRA is its time to full from empty (Burst emission
// intervals), ceil(ceil(Burst * periodMicros / rate) / 1000) ms on the
// reduced emission interval (G2 of docs/arithmetic.md; NewPolicy guarantees
// the product fits).
func (q GCRA) windowMillis() int64 {
	rate, per := q.Emission()
	return ceilDiv(ceilDiv(q.Burst*per, rate), 1000)
}

// horizonMillis: the theoretical arrival time lies at most one time to full
// after the effective instant in microseconds, which is up to 999 µs after
// the effective millisecond, so the reset, rounded up to a whole
// millisecond, is at most one time to full plus 1 ms away (G2).
func (q GCRA) horizonMillis() int64 { return q.windowMillis() + 1 }

// validate checks formulas G1-G2 of docs/arithmetic.md on the reduced
// emission interval (GCRA.Emission): periodMicros P' and rate R' divided by
// their greatest common divisor, which is what the programs receive.
func (q GCRA) validate(v *policyValidator, grace int64) (int64, variant) {
	v.positive("Params.Burst", q.Burst)
	v.positive("Params.Rate", q.Rate)
	v.millis("Params.Period", q.Period, false)
	if q.Burst <= 0 || q.Rate <= 0 || q.Period <= 0 || q.Period%time.Millisecond != 0 {
		return q.Burst, q
	}
	rate, per := q.Emission()
	// G1: the stored arrival offset d <= B*P' + 999*R' and every
	// intermediate below it; R' travels to the programs as an exact integer.
	if !mulFits(rate, 999) {
		v.fail("Params.Rate", ErrArithmeticRange, "%d (reduced rate %d per %d µs) * 999 > %d", q.Rate, rate, per, MaxExactInt)
		return q.Burst, q
	}
	if !mulFits(q.Burst, per) || !addFits(q.Burst*per, 999*rate, MaxExactInt) {
		v.fail("Params.Burst", ErrArithmeticRange, "burst %d * period %d µs + 999 * rate %d (reduced) > %d", q.Burst, per, rate, MaxExactInt)
		return q.Burst, q
	}
	// G2: time to full plus 1 ms (the reset and retry horizon) plus grace
	// (the TTL) <= MaxHorizonMillis.
	v.sumWithin("Params.Period", q.horizonMillis(), grace, MaxHorizonMillis)
	return q.Burst, q
}

// fallbackShares: the share as the burst and the rate divided by n, first
// as the period multiplied by n (when that is in range), then as the rate
// divided by n, rounded down, at least 1.
func (q GCRA) fallbackShares(share, n int64) ([]Params, error) {
	var out []Params
	if q.Period > 0 && n <= math.MaxInt64/int64(q.Period) {
		out = append(out, GCRA{Rate: q.Rate, Period: q.Period * time.Duration(n), Burst: share})
	}
	return append(out, GCRA{Rate: max(1, q.Rate/n), Period: q.Period, Burst: share}), nil
}

func (GCRA) sealedParams() {}
