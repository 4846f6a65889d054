package ratelimit

import (
	"fmt"
	"time"
)

// Algorithm selects one of the three supported algorithms. The zero value is
// invalid.
type Algorithm int

// The supported algorithms.
const (
	AlgorithmFixedWindow Algorithm = iota + 1
	AlgorithmSlidingWindowCounter
	AlgorithmTokenBucket
)

var algorithmNames = [...]string{
	AlgorithmFixedWindow:          "fixed_window",
	AlgorithmSlidingWindowCounter: "sliding_window_counter",
	AlgorithmTokenBucket:          "token_bucket",
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
	return a >= AlgorithmFixedWindow && a <= AlgorithmTokenBucket
}

// ParseAlgorithm maps a wire name to an Algorithm; unknown names are errors.
func ParseAlgorithm(s string) (Algorithm, error) {
	for a := AlgorithmFixedWindow; a <= AlgorithmTokenBucket; a++ {
		if algorithmNames[a] == s {
			return a, nil
		}
	}
	return 0, fmt.Errorf("%w: algorithm %q is not fixed_window, sliding_window_counter or token_bucket", ErrUnsupported, bounded(s))
}

// Params is the sealed set of algorithm parameter types: FixedWindow,
// SlidingWindowCounter and TokenBucket. No other package can add a type.
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

// Algorithm implements Params.
func (FixedWindow) Algorithm() Algorithm { return AlgorithmFixedWindow }

// Algorithm implements Params.
func (SlidingWindowCounter) Algorithm() Algorithm { return AlgorithmSlidingWindowCounter }

// Algorithm implements Params.
func (TokenBucket) Algorithm() Algorithm { return AlgorithmTokenBucket }

func (q FixedWindow) limit() int64          { return q.Limit }
func (q SlidingWindowCounter) limit() int64 { return q.Limit }
func (q TokenBucket) limit() int64          { return q.Capacity }

func (q FixedWindow) windowMillis() int64          { return q.Window.Milliseconds() }
func (q SlidingWindowCounter) windowMillis() int64 { return q.Window.Milliseconds() }

// windowMillis of a token bucket is its time to fill from empty,
// ceil(Capacity * RefillPeriod / RefillTokens) ms (T2 of docs/arithmetic.md;
// NewPolicy guarantees the product fits).
func (q TokenBucket) windowMillis() int64 {
	return ceilDiv(q.Capacity*q.RefillPeriod.Milliseconds(), q.RefillTokens)
}

// horizonMillis: the window end is at most one window away (F2).
func (q FixedWindow) horizonMillis() int64 { return q.windowMillis() }

// horizonMillis: the reset is at most two windows away (S3).
func (q SlidingWindowCounter) horizonMillis() int64 { return 2 * q.windowMillis() }

// horizonMillis: a bucket is full at most one fill time away (T2).
func (q TokenBucket) horizonMillis() int64 { return q.windowMillis() }

func (FixedWindow) sealedParams()          {}
func (SlidingWindowCounter) sealedParams() {}
func (TokenBucket) sealedParams()          {}
