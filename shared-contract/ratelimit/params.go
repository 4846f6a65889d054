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
	// AlgorithmSlidingLog is the exact sliding log: every admission is kept
	// with its cost for one window (ADR 0024).
	AlgorithmSlidingLog
	// AlgorithmLeakyBucket is the leaky bucket as a queue: a request beyond
	// the rate is admitted with a delay while the queue has room (nginx's
	// limit_req with burst and delay=; ADR 0028).
	AlgorithmLeakyBucket
)

var algorithmNames = [...]string{
	AlgorithmFixedWindow:          "fixed_window",
	AlgorithmSlidingWindowCounter: "sliding_window_counter",
	AlgorithmTokenBucket:          "token_bucket",
	AlgorithmGCRA:                 "gcra",
	AlgorithmSlidingLog:           "sliding_log",
	AlgorithmLeakyBucket:          "leaky_bucket",
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
	return a >= AlgorithmFixedWindow && a <= AlgorithmLeakyBucket
}

// ParseAlgorithm maps a wire name to an Algorithm; unknown names are errors.
func ParseAlgorithm(s string) (Algorithm, error) {
	for a := AlgorithmFixedWindow; a <= AlgorithmLeakyBucket; a++ {
		if algorithmNames[a] == s {
			return a, nil
		}
	}
	return 0, fmt.Errorf("%w: algorithm %q is not fixed_window, sliding_window_counter, token_bucket, gcra, sliding_log or leaky_bucket", ErrUnsupported, bounded(s))
}

// Params is the sealed set of algorithm parameter types: FixedWindow,
// SlidingWindowCounter, TokenBucket, GCRA, SlidingLog and LeakyBucket. No
// other package can add a type.
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
	_ numbered = SlidingLog{}
	_ numbered = LeakyBucket{}
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

// LeakyBucket is the leaky bucket as a queue (ADR 0028): requests leave at
// Rate per Period (whole milliseconds), one emission interval Period/Rate
// apart on the server clock. A request that finds the queue empty goes at
// once; one beyond the rate is admitted with a delay, its slot, while at
// most QueueSize requests are waiting, the first DelayAfter of them
// without delay (nginx's delay=); beyond that it is denied. It runs on the
// GCRA arithmetic with a burst of QueueSize+1, so Limit is QueueSize+1.
// MaxDelay is the longest a caller holds an admitted request; it must be
// at least the longest delay the queue can give (LongestDelay).
type LeakyBucket struct {
	Rate       int64
	Period     time.Duration
	QueueSize  int64
	DelayAfter int64
	MaxDelay   time.Duration
}

// gcra is the GCRA the queue runs on: burst QueueSize+1.
func (q LeakyBucket) gcra() GCRA {
	return GCRA{Rate: q.Rate, Period: q.Period, Burst: q.QueueSize + 1}
}

// LongestDelay is the longest delay the queue can give a request,
// (QueueSize - DelayAfter) emission intervals rounded up to a whole
// millisecond; 0 for parameters without an emission interval or whose
// product (QueueSize - DelayAfter) * period exceeds int64 (NewPolicy
// refuses both).
func (q LeakyBucket) LongestDelay() time.Duration {
	rate, per := q.gcra().Emission()
	waiting := q.QueueSize - q.DelayAfter
	if rate < 1 || waiting <= 0 || !mulFits(waiting, per) {
		return 0
	}
	return time.Duration(ceilDiv(ceilDiv(waiting*per, rate), 1000)) * time.Millisecond
}

// Algorithm implements Params.
func (LeakyBucket) Algorithm() Algorithm { return AlgorithmLeakyBucket }

func (q LeakyBucket) limit() int64         { return q.QueueSize + 1 }
func (q LeakyBucket) windowMillis() int64  { return q.gcra().windowMillis() }
func (q LeakyBucket) horizonMillis() int64 { return q.gcra().horizonMillis() }
func (LeakyBucket) sealedParams()          {}

// Algorithm implements Params.
func (SlidingLog) Algorithm() Algorithm { return AlgorithmSlidingLog }

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
func (q SlidingLog) limit() int64           { return q.Limit }

func (q FixedWindow) windowMillis() int64          { return q.Window.Milliseconds() }
func (q SlidingWindowCounter) windowMillis() int64 { return q.Window.Milliseconds() }
func (q SlidingLog) windowMillis() int64           { return q.Window.Milliseconds() }

// horizonMillis: the log is empty one window after its newest entry, which
// is at most the effective instant (L2).
func (q SlidingLog) horizonMillis() int64 { return q.windowMillis() }

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
func (SlidingLog) sealedParams()           {}

// Policy's per-algorithm numbers: each reads its Params variant through
// numbered (or the one variant that has the number), so what varies by
// algorithm stays with the parameter types.

// Limit is the fixed/sliding window or sliding log limit, the token-bucket
// capacity or the GCRA burst; 0 for the zero Policy.
func (p Policy) Limit() int64 {
	q, ok := p.params.(numbered)
	if !ok {
		return 0
	}
	return q.limit()
}

// WindowMillis is the policy's period in whole milliseconds: the window of a
// fixed or sliding window, and for a token bucket the time to refill from
// empty to full, ceil(Capacity * RefillPeriod / RefillTokens), and for GCRA
// the time to full from empty, ceil(Burst * Period / Rate), and for the
// sliding log its window; 0 for the zero
// Policy.
func (p Policy) WindowMillis() int64 {
	q, ok := p.params.(numbered)
	if !ok {
		return 0
	}
	return q.windowMillis()
}

// HorizonMillis bounds, in milliseconds, how far a decision's reset may lie
// after the effective now: one window (fixed window, F2 of
// docs/arithmetic.md), two windows (sliding counter, S3), the time to fill
// (token bucket, T2), the time to full plus 1 ms (GCRA, G2), one window
// (sliding log, L2); 0 for the zero
// Policy.
func (p Policy) HorizonMillis() int64 {
	q, ok := p.params.(numbered)
	if !ok {
		return 0
	}
	return q.horizonMillis()
}

// Refill returns a token bucket's RefillTokens and RefillPeriod in whole
// milliseconds; ok is false for the other algorithms and the zero Policy.
func (p Policy) Refill() (tokens, periodMillis int64, ok bool) {
	q, ok := p.params.(TokenBucket)
	if !ok {
		return 0, 0, false
	}
	return q.RefillTokens, q.RefillPeriod.Milliseconds(), true
}

// Emission returns a GCRA policy's emission interval Period/Rate as the
// reduced fraction periodMicros/rate of microseconds (GCRA.Emission) and its
// burst, and for a leaky bucket those of the GCRA it runs on (burst
// QueueSize+1; ADR 0028); ok is false for the other algorithms and the zero
// Policy.
func (p Policy) Emission() (rate, periodMicros, burst int64, ok bool) {
	var q GCRA
	switch v := p.params.(type) {
	case GCRA:
		q = v
	case LeakyBucket:
		q = v.gcra()
	default:
		return 0, 0, 0, false
	}
	rate, periodMicros = q.Emission()
	return rate, periodMicros, q.Burst, true
}

// Queue returns a leaky bucket's DelayAfter and MaxDelay; ok is false for
// the other algorithms and the zero Policy.
func (p Policy) Queue() (delayAfter int64, maxDelay time.Duration, ok bool) {
	q, ok := p.params.(LeakyBucket)
	if !ok {
		return 0, 0, false
	}
	return q.DelayAfter, q.MaxDelay, true
}
