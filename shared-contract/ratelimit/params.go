package ratelimit

import (
	"fmt"
	"time"
)

// Algorithm selects one of the supported algorithms. The zero value is
// invalid.
type Algorithm int

// The supported algorithms.
const (
	AlgorithmFixedWindow Algorithm = iota + 1
	AlgorithmSlidingWindowCounter
	AlgorithmTokenBucket
	// AlgorithmGCRA is the generic cell rate algorithm (go-redis/redis_rate's
	// limiter; ADR 0021).
	AlgorithmGCRA
)

var algorithmNames = [...]string{
	AlgorithmFixedWindow:          "fixed_window",
	AlgorithmSlidingWindowCounter: "sliding_window_counter",
	AlgorithmTokenBucket:          "token_bucket",
	AlgorithmGCRA:                 "gcra",
}

// String returns the stable wire name ("fixed_window", ...), used in the
// policy file, the key digest and stored state.
func (a Algorithm) String() string {
	if a.Valid() {
		return algorithmNames[a]
	}
	return fmt.Sprintf("Algorithm(%d)", int(a))
}

// Valid reports whether a is one of the supported algorithms.
func (a Algorithm) Valid() bool {
	return a >= AlgorithmFixedWindow && a <= AlgorithmGCRA
}

// ParseAlgorithm maps a wire name to an Algorithm; unknown names are errors.
func ParseAlgorithm(s string) (Algorithm, error) {
	for a := AlgorithmFixedWindow; a <= AlgorithmGCRA; a++ {
		if algorithmNames[a] == s {
			return a, nil
		}
	}
	return 0, fmt.Errorf("%w: algorithm %q is not fixed_window, sliding_window_counter, token_bucket or gcra", ErrUnsupported, bounded(s))
}

// Params is the sealed set of algorithm parameter types: FixedWindow,
// SlidingWindowCounter, TokenBucket and GCRA. No other package can add a
// type.
//
//sumtype:decl
type Params interface {
	// Algorithm is the algorithm these parameters belong to.
	Algorithm() Algorithm
	sealedParams()
}

// numbered is what every Params variant answers for Policy's per-algorithm
// numbers (Limit, WindowMillis, HorizonMillis), in integer milliseconds.
type numbered interface {
	// limit is the window limit or the bucket capacity.
	limit() int64
	// windowMillis is the window, or the bucket's time to fill from empty.
	windowMillis() int64
	// horizonMillis bounds a decision's reset offset.
	horizonMillis() int64
}

var (
	_ numbered = FixedWindow{}
	_ numbered = SlidingWindowCounter{}
	_ numbered = TokenBucket{}
	_ numbered = GCRA{}
)

// FixedWindow admits Limit units per aligned window of Window (whole
// milliseconds, counted from the Unix epoch in server time).
type FixedWindow struct {
	Limit  int64
	Window time.Duration
}

// SlidingWindowCounter admits about Limit units per sliding Window, weighting
// the previous aligned window's count conservatively (rounded up). Its
// decisions are ApproximateAlgorithm.
type SlidingWindowCounter struct {
	Limit  int64
	Window time.Duration
}

// TokenBucket holds at most Capacity tokens, starts full and gains
// RefillTokens every RefillPeriod, accrued exactly (sub-token remainders are
// kept), independently of how often it is evaluated.
type TokenBucket struct {
	Capacity     int64
	RefillTokens int64
	RefillPeriod time.Duration
}

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

// Algorithm implements Params.
func (GCRA) Algorithm() Algorithm { return AlgorithmGCRA }

// Algorithm implements Params.
func (FixedWindow) Algorithm() Algorithm { return AlgorithmFixedWindow }

// Algorithm implements Params.
func (SlidingWindowCounter) Algorithm() Algorithm { return AlgorithmSlidingWindowCounter }

// Algorithm implements Params.
func (TokenBucket) Algorithm() Algorithm { return AlgorithmTokenBucket }

func (q FixedWindow) limit() int64          { return q.Limit }
func (q SlidingWindowCounter) limit() int64 { return q.Limit }
func (q TokenBucket) limit() int64          { return q.Capacity }
func (q GCRA) limit() int64                 { return q.Burst }

func (q FixedWindow) windowMillis() int64          { return q.Window.Milliseconds() }
func (q SlidingWindowCounter) windowMillis() int64 { return q.Window.Milliseconds() }

// windowMillis of a token bucket is its time to fill from empty,
// ceil(Capacity * RefillPeriod / RefillTokens) ms (T2 of docs/arithmetic.md;
// NewPolicy guarantees the product fits).
func (q TokenBucket) windowMillis() int64 {
	return ceilDiv(q.Capacity*q.RefillPeriod.Milliseconds(), q.RefillTokens)
}

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

// horizonMillis: the window end is at most one window away (F2).
func (q FixedWindow) horizonMillis() int64 { return q.windowMillis() }

// horizonMillis: the reset is at most two windows away (S3).
func (q SlidingWindowCounter) horizonMillis() int64 { return 2 * q.windowMillis() }

// horizonMillis: a bucket is full at most one fill time away (T2).
func (q TokenBucket) horizonMillis() int64 { return q.windowMillis() }

func (FixedWindow) sealedParams()          {}
func (SlidingWindowCounter) sealedParams() {}
func (TokenBucket) sealedParams()          {}
func (GCRA) sealedParams()                 {}
