package ratelimit

import (
	"fmt"
	"math"
	"time"
)

// The integer edges every provider works within. The programs run in Redis
// Lua, whose numbers are IEEE-754 doubles: integers are exact only up to
// MaxExactInt, so every stored value, reply field and intermediate result must
// stay at or below it. The formulas each check enforces (A1-A3, F1-F2, S1-S3,
// T1-T2) are written out in docs/arithmetic.md; the comment on each check
// names its formula.
const (
	// MaxExactInt is 2^53-1, the largest integer a double holds exactly.
	MaxExactInt int64 = 1<<53 - 1
	// MaxServerMillis is the latest server time, in Unix milliseconds, the
	// programs accept (2^45 ms, about the year 3084). A later clock is
	// CLOCK_UNSAFE.
	MaxServerMillis int64 = 1 << 45
	// WeightScale is the fixed-point scale of the sliding-window weight.
	WeightScale int64 = 1_000_000
	// MaxHorizonMillis bounds every time offset a policy can produce (window
	// ends and reset instants relative to now, retry-after, TTL): it is the
	// longest time.Duration in whole milliseconds (about 292 years), so every
	// offset is also representable as Decision.RetryAfter, and
	// MaxServerMillis + MaxHorizonMillis stays far below MaxExactInt.
	MaxHorizonMillis int64 = math.MaxInt64 / int64(time.Millisecond)
)

// Compile-time proof that an instant plus an offset stays exact (A1 in
// docs/arithmetic.md): the constant expression overflows uint64 conversion
// and fails to compile if MaxServerMillis+MaxHorizonMillis > MaxExactInt.
const _ = uint64(MaxExactInt - MaxServerMillis - MaxHorizonMillis)

// ceilDiv is integer ceiling division for a >= 0, b > 0, computed from the
// quotient and remainder so that no a+b-1 intermediate is formed.
func ceilDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 {
		q++
	}
	return q
}

// mulFits reports whether a*b <= MaxExactInt for a, b >= 0 without computing
// an overflowing product.
func mulFits(a, b int64) bool {
	return a == 0 || b <= MaxExactInt/a
}

// addFits reports whether a+b <= max for 0 <= a, b, max without computing an
// overflowing sum.
func addFits(a, b, max int64) bool {
	return a <= max && b <= max-a
}

// gcd is the greatest common divisor of a, b > 0 (Euclid).
func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// policyValidator collects every violation NewPolicy finds, each a
// *PolicyError; its per-algorithm methods below check the formulas of
// docs/arithmetic.md.
type policyValidator struct{ errs []error }

func (v *policyValidator) fail(field string, sentinel error, format string, args ...any) {
	v.errs = append(v.errs, &PolicyError{Field: field, Reason: fmt.Sprintf(format, args...), Err: sentinel})
}

func (v *policyValidator) positive(field string, n int64) {
	if n <= 0 {
		v.fail(field, ErrNonPositive, "%d", n)
	}
}

func (v *policyValidator) within(field string, n, max int64) {
	if n > max {
		v.fail(field, ErrArithmeticRange, "%d > %d", n, max)
	}
}

func (v *policyValidator) sumWithin(field string, a, b, max int64) {
	if a >= 0 && b >= 0 && !addFits(a, b, max) {
		v.fail(field, ErrArithmeticRange, "%d + %d > %d", a, b, max)
	}
}

// millis converts d to whole milliseconds, failing on sub-millisecond
// remainders and on non-positive values (zero allowed when zeroOK).
func (v *policyValidator) millis(field string, d time.Duration, zeroOK bool) int64 {
	if d%time.Millisecond != 0 {
		v.fail(field, ErrNotWholeMillis, "%v", d)
		return 0
	}
	if d < 0 || d == 0 && !zeroOK {
		v.fail(field, ErrNonPositive, "%v", d)
		return 0
	}
	return d.Milliseconds()
}

// fixedWindow checks formulas F1-F2 of docs/arithmetic.md.
func (v *policyValidator) fixedWindow(p FixedWindow, grace int64) int64 {
	v.positive("Params.Limit", p.Limit)
	w := v.millis("Params.Window", p.Window, false)
	// F1: used + cost <= 2*limit.
	v.within("Params.Limit", p.Limit, MaxExactInt/2)
	// F2: retry, reset offset and TTL: window + grace <= MaxHorizonMillis.
	v.sumWithin("Params.Window", w, grace, MaxHorizonMillis)
	return p.Limit
}

// slidingWindowCounter checks formulas S1-S3 of docs/arithmetic.md.
func (v *policyValidator) slidingWindowCounter(p SlidingWindowCounter, grace int64) int64 {
	v.positive("Params.Limit", p.Limit)
	w := v.millis("Params.Window", p.Window, false)
	// S1: count * weight, budget * WeightScale <= limit * WeightScale.
	v.within("Params.Limit", p.Limit, MaxExactInt/WeightScale)
	// S2: (window - elapsed) * WeightScale and threshold * window are at
	// most window * WeightScale.
	v.within("Params.Window", w, MaxExactInt/WeightScale)
	// S3: reset (k+2)*window, retry and TTL: 2*window + grace <=
	// MaxHorizonMillis. 2*w cannot overflow: w <= MaxInt64/1e6.
	v.sumWithin("Params.Window", 2*w, grace, MaxHorizonMillis)
	return p.Limit
}

// tokenBucket checks formulas T1-T2 of docs/arithmetic.md on the reduced
// rate: RefillTokens and RefillPeriod (in ms) divided by their greatest
// common divisor, so that the identical rates "1e9 per 24h" and "625 per
// 54ms" get the same answer. It returns the limit and the parameters the
// programs receive: p itself when p already satisfies T1 (state written by
// earlier versions keeps its unit, 1/P tokens), the reduced form otherwise.
func (v *policyValidator) tokenBucket(p TokenBucket, grace int64) (int64, TokenBucket) {
	v.positive("Params.Capacity", p.Capacity)
	v.positive("Params.RefillTokens", p.RefillTokens)
	period := v.millis("Params.RefillPeriod", p.RefillPeriod, false)
	if p.Capacity <= 0 || p.RefillTokens <= 0 || period <= 0 {
		return p.Capacity, p
	}
	g := gcd(p.RefillTokens, period)
	rate, per := p.RefillTokens/g, period/g
	// T1: the refill rate travels to the program as an exact integer.
	if rate > MaxExactInt {
		v.fail("Params.RefillTokens", ErrArithmeticRange, "%d (reduced rate %d per %d ms) > %d", p.RefillTokens, rate, per, MaxExactInt)
	}
	// T1: the scaled full level capacity * period bounds every scaled token
	// intermediate.
	if !mulFits(p.Capacity, per) {
		v.fail("Params.Capacity", ErrArithmeticRange, "capacity %d * refill period %d ms (reduced rate %d per %d ms) > %d", p.Capacity, per, rate, per, MaxExactInt)
		return p.Capacity, p
	}
	// T2: time to fill from empty (bounds retry and reset offset) plus grace
	// (the TTL) <= MaxHorizonMillis. C*P/R is the same for both forms.
	reduced := TokenBucket{Capacity: p.Capacity, RefillTokens: rate, RefillPeriod: time.Duration(per) * time.Millisecond}
	fill := reduced.windowMillis()
	v.sumWithin("Params.RefillPeriod", fill, grace, MaxHorizonMillis)
	if p.RefillTokens <= MaxExactInt && mulFits(p.Capacity, period) {
		return p.Capacity, p
	}
	return p.Capacity, reduced
}

// gcra checks formulas G1-G2 of docs/arithmetic.md on the reduced emission
// interval (GCRA.Emission): periodMicros P' and rate R' divided by their
// greatest common divisor, which is what the programs receive.
func (v *policyValidator) gcra(p GCRA, grace int64) int64 {
	v.positive("Params.Burst", p.Burst)
	v.positive("Params.Rate", p.Rate)
	v.millis("Params.Period", p.Period, false)
	if p.Burst <= 0 || p.Rate <= 0 || p.Period <= 0 || p.Period%time.Millisecond != 0 {
		return p.Burst
	}
	rate, per := p.Emission()
	// G1: the stored arrival offset d <= B*P' + 999*R' and every
	// intermediate below it; R' travels to the programs as an exact integer.
	if !mulFits(rate, 999) {
		v.fail("Params.Rate", ErrArithmeticRange, "%d (reduced rate %d per %d µs) * 999 > %d", p.Rate, rate, per, MaxExactInt)
		return p.Burst
	}
	if !mulFits(p.Burst, per) || !addFits(p.Burst*per, 999*rate, MaxExactInt) {
		v.fail("Params.Burst", ErrArithmeticRange, "burst %d * period %d µs + 999 * rate %d (reduced) > %d", p.Burst, per, rate, MaxExactInt)
		return p.Burst
	}
	// G2: time to full plus 1 ms (the reset and retry horizon) plus grace
	// (the TTL) <= MaxHorizonMillis.
	v.sumWithin("Params.Period", p.horizonMillis(), grace, MaxHorizonMillis)
	return p.Burst
}

// leakyBucket checks the queue's fields and then formulas G1-G2 on the
// GCRA it runs on (LeakyBucket.gcra: burst QueueSize+1; ADR 0028): 0 <=
// DelayAfter <= QueueSize, and the longest delay a request can be given,
// ceil((QueueSize - DelayAfter) emission intervals) in whole milliseconds,
// at most MaxDelay, so an admitted request can always be held to its slot.
func (v *policyValidator) leakyBucket(p LeakyBucket, grace int64) int64 {
	if p.QueueSize < 0 {
		v.fail("Params.QueueSize", ErrNonPositive, "%d: want 0 or more", p.QueueSize)
	}
	if p.DelayAfter < 0 || p.DelayAfter > max(p.QueueSize, 0) {
		v.fail("Params.DelayAfter", ErrArithmeticRange, "%d: want 0..queueSize %d", p.DelayAfter, p.QueueSize)
	}
	maxDelay := v.millis("Params.MaxDelay", p.MaxDelay, true)
	if p.QueueSize >= MaxExactInt {
		// QueueSize+1 is the burst, at most M (G1); refused here, before
		// QueueSize+1 could overflow.
		v.fail("Params.QueueSize", ErrArithmeticRange, "%d: the burst queueSize+1 would exceed %d", p.QueueSize, MaxExactInt)
	}
	if p.QueueSize < 0 || p.QueueSize >= MaxExactInt {
		return 0
	}
	errs := len(v.errs)
	limit := v.gcra(p.gcra(), grace)
	if len(v.errs) > errs {
		return limit
	}
	if longest := p.LongestDelay(); longest > time.Duration(maxDelay)*time.Millisecond {
		v.fail("Params.MaxDelay", ErrArithmeticRange, "%v: the longest delay of this queue is %v ((queueSize - delayAfter) emission intervals)", p.MaxDelay, longest)
	}
	return limit
}

// slidingLog checks formulas L1-L2 of docs/arithmetic.md.
func (v *policyValidator) slidingLog(p SlidingLog, grace int64) int64 {
	v.positive("Params.Limit", p.Limit)
	w := v.millis("Params.Window", p.Window, false)
	// L1: the log holds at most Limit entries; the cap bounds its bytes
	// (and every sum, at most 2*Limit, is far below MaxExactInt).
	if p.Limit > MaxSlidingLogLimit {
		v.fail("Params.Limit", ErrLimitAboveCap, "%d > %d (the log's entries per subject)", p.Limit, MaxSlidingLogLimit)
	}
	// L2: reset (newest entry + window), retry and TTL: window + grace <=
	// MaxHorizonMillis.
	v.sumWithin("Params.Window", w, grace, MaxHorizonMillis)
	return p.Limit
}
