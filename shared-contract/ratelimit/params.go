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
type Params interface {
	// Algorithm is the algorithm these parameters belong to.
	Algorithm() Algorithm
	sealedParams()
}

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

func (FixedWindow) sealedParams()          {}
func (SlidingWindowCounter) sealedParams() {}
func (TokenBucket) sealedParams()          {}
