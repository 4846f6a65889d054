package ratelimit

// The integer edges every provider works within. The programs run in Redis
// Lua, whose numbers are IEEE-754 doubles: integers are exact only up to
// MaxExactInt, so every stored value, reply field and intermediate result must
// stay at or below it. The formulas each check enforces are written out in
// docs/arithmetic.md; the comment on each check names its formula.
const (
	// MaxExactInt is 2^53-1, the largest integer a double holds exactly.
	MaxExactInt int64 = 1<<53 - 1
	// MaxServerMillis is the latest server time, in Unix milliseconds, the
	// programs accept (about the year 3084). A later clock is CLOCK_UNSAFE.
	// It leaves MaxExactInt-MaxServerMillis (~2.8e5 years of ms) of headroom
	// for window ends, reset instants and TTLs.
	MaxServerMillis int64 = 1 << 45
	// WeightScale is the fixed-point scale of the sliding-window weight.
	WeightScale int64 = 1_000_000
	// MaxHorizonMillis bounds every time offset a policy can produce (window
	// ends, reset instants, retry-after, TTL): MaxServerMillis + horizon must
	// not exceed MaxExactInt.
	MaxHorizonMillis = MaxExactInt - MaxServerMillis
)

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

// addFits reports whether a+b <= MaxExactInt for a, b >= 0.
func addFits(a, b int64) bool {
	return b <= MaxExactInt-a
}
