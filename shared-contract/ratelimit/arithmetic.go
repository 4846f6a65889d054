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
// *PolicyError; each Params variant's validate (alg_<name>.go) checks its
// formulas of docs/arithmetic.md with it.
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
