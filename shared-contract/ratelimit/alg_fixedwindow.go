package ratelimit

import "time"

// FixedWindow admits Limit units per aligned window of Window (whole
// milliseconds, counted from the Unix epoch in server time).
type FixedWindow struct {
	Limit  int64
	Window time.Duration
}

var fixedWindowSpec = register[FixedWindow](AlgorithmSpec{
	Algorithm: AlgorithmFixedWindow,
	Name:      "fixed_window",
	fields:    []ParamField{{Name: "limit", Kind: FieldInt}, {Name: "window", Kind: FieldDuration}},
	Build: func(v FieldValues) Params {
		return FixedWindow{Limit: v.Ints["limit"], Window: v.Durations["window"]}
	},
	Certainty: Certain,
	// The window's count only grows until its end; retry = end - eff for
	// every cost.
	DenialCacheExact: true,
	Charge:           true,
	Refund:           true,
})

// Algorithm implements Params.
func (FixedWindow) Algorithm() Algorithm { return AlgorithmFixedWindow }

func (q FixedWindow) limit() int64        { return q.Limit }
func (q FixedWindow) windowMillis() int64 { return q.Window.Milliseconds() }

// horizonMillis: the window end is at most one window away (F2).
func (q FixedWindow) horizonMillis() int64 { return q.windowMillis() }

// validate checks formulas F1-F2 of docs/arithmetic.md.
func (q FixedWindow) validate(v *policyValidator, grace int64) (int64, variant) {
	v.positive("Params.Limit", q.Limit)
	w := v.millis("Params.Window", q.Window, false)
	// F1: used + cost <= 2*limit.
	v.within("Params.Limit", q.Limit, MaxExactInt/2)
	// F2: retry, reset offset and TTL: window + grace <= MaxHorizonMillis.
	v.sumWithin("Params.Window", w, grace, MaxHorizonMillis)
	return q.Limit, q
}

// fallbackShares: the same window with the share as its limit.
func (q FixedWindow) fallbackShares(share, _ int64) ([]Params, error) {
	return []Params{FixedWindow{Limit: share, Window: q.Window}}, nil
}

func (FixedWindow) sealedParams() {}
