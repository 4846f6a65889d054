package ratelimit

import (
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
