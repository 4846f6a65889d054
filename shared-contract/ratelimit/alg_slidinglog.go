package ratelimit

import "time"

// MaxSlidingLogLimit caps SlidingLog.Limit: the log holds at most Limit
// entries (every entry carries a cost of at least 1), so the cap bounds a
// subject's state at 11 + 8*MaxSlidingLogLimit bytes plus the revision,
// about 80 KB (L1 of docs/arithmetic.md, ADR 0024).
const MaxSlidingLogLimit = 10_000

// SlidingLog admits a request iff the costs admitted in the last Window of
// server time (whole milliseconds) plus its cost are at most Limit: the
// exact rolling window. Only admitted requests are stored, one entry per
// admission carrying its cost, so a subject's state is bounded by Limit
// (at most MaxSlidingLogLimit), never by its request rate (ADR 0024).
type SlidingLog struct {
	Limit  int64
	Window time.Duration
}

var slidingLogSpec = register[SlidingLog](AlgorithmSpec{
	Algorithm: AlgorithmSlidingLog,
	Name:      "sliding_log",
	// The limit is capped (MaxSlidingLogLimit): NewPolicy names a larger
	// one.
	fields: []ParamField{{Name: "limit", Kind: FieldInt}, {Name: "window", Kind: FieldDuration}},
	Build: func(v FieldValues) Params {
		return SlidingLog{Limit: v.Ints["limit"], Window: v.Durations["window"]}
	},
	Certainty: Certain,
	// A denial writes nothing; without traffic the window sum only falls,
	// at the instants its entries leave; retry is the first millisecond
	// enough of them have left, and a larger cost needs more of them (ADR
	// 0024).
	DenialCacheExact: true,
	Charge:           true,
	LeaseRecords:     true,
	Refund:           true,
})

// Algorithm implements Params.
func (SlidingLog) Algorithm() Algorithm { return AlgorithmSlidingLog }

func (q SlidingLog) limit() int64        { return q.Limit }
func (q SlidingLog) windowMillis() int64 { return q.Window.Milliseconds() }

// horizonMillis: the log is empty one window after its newest entry, which
// is at most the effective instant (L2).
func (q SlidingLog) horizonMillis() int64 { return q.windowMillis() }

// validate checks formulas L1-L2 of docs/arithmetic.md.
func (q SlidingLog) validate(v *policyValidator, grace int64) (int64, variant) {
	v.positive("Params.Limit", q.Limit)
	w := v.millis("Params.Window", q.Window, false)
	// L1: the log holds at most Limit entries; the cap bounds its bytes
	// (and every sum, at most 2*Limit, is far below MaxExactInt).
	if q.Limit > MaxSlidingLogLimit {
		v.fail("Params.Limit", ErrLimitAboveCap, "%d > %d (the log's entries per subject)", q.Limit, MaxSlidingLogLimit)
	}
	// L2: reset (newest entry + window), retry and TTL: window + grace <=
	// MaxHorizonMillis.
	v.sumWithin("Params.Window", w, grace, MaxHorizonMillis)
	return q.Limit, q
}

// fallbackShares: the same window with the share as its limit.
func (q SlidingLog) fallbackShares(share, _ int64) ([]Params, error) {
	return []Params{SlidingLog{Limit: share, Window: q.Window}}, nil
}

func (SlidingLog) sealedParams() {}
