package ratelimit

import "time"

// SlidingWindowCounter admits about Limit units per sliding Window, weighting
// the previous aligned window's count conservatively (rounded up). Its
// decisions are ApproximateAlgorithm.
type SlidingWindowCounter struct {
	Limit  int64
	Window time.Duration
}

var slidingWindowCounterSpec = register[SlidingWindowCounter](AlgorithmSpec{
	Algorithm: AlgorithmSlidingWindowCounter,
	Name:      "sliding_window_counter",
	fields:    []ParamField{{Name: "limit", Kind: FieldInt}, {Name: "window", Kind: FieldDuration}},
	Build: func(v FieldValues) Params {
		return SlidingWindowCounter{Limit: v.Ints["limit"], Window: v.Durations["window"]}
	},
	Certainty: ApproximateAlgorithm,
	// The estimate never grows without traffic (the weight falls, and at a
	// window's end the estimate falls to the current count); retry is the
	// smallest honest one. Exact with respect to the program (the program
	// itself approximates a sliding window).
	DenialCacheExact: true,
	Charge:           true,
	Refund:           true,
})

// Algorithm implements Params.
func (SlidingWindowCounter) Algorithm() Algorithm { return AlgorithmSlidingWindowCounter }

func (q SlidingWindowCounter) limit() int64        { return q.Limit }
func (q SlidingWindowCounter) windowMillis() int64 { return q.Window.Milliseconds() }

// horizonMillis: the reset is at most two windows away (S3).
func (q SlidingWindowCounter) horizonMillis() int64 { return 2 * q.windowMillis() }

// validate checks formulas S1-S3 of docs/arithmetic.md.
func (q SlidingWindowCounter) validate(v *policyValidator, grace int64) (int64, variant) {
	v.positive("Params.Limit", q.Limit)
	w := v.millis("Params.Window", q.Window, false)
	// S1: count * weight, budget * WeightScale <= limit * WeightScale.
	v.within("Params.Limit", q.Limit, MaxExactInt/WeightScale)
	// S2: (window - elapsed) * WeightScale and threshold * window are at
	// most window * WeightScale.
	v.within("Params.Window", w, MaxExactInt/WeightScale)
	// S3: reset (k+2)*window, retry and TTL: 2*window + grace <=
	// MaxHorizonMillis. 2*w cannot overflow: w <= MaxInt64/1e6.
	v.sumWithin("Params.Window", 2*w, grace, MaxHorizonMillis)
	return q.Limit, q
}

// fallbackShares: the same window with the share as its limit.
func (q SlidingWindowCounter) fallbackShares(share, _ int64) ([]Params, error) {
	return []Params{SlidingWindowCounter{Limit: share, Window: q.Window}}, nil
}

func (SlidingWindowCounter) sealedParams() {}
