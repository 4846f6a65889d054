package ratelimit

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// FailurePolicy says what a caller does when no decision can be had.
// FailClosed is the default; LocalFallback (opt-in, docs/degraded-mode.md)
// lets an in-process limiter with this instance's share of the limit decide
// while the coordination store is unreachable. FailOpen exists so that a
// configuration asking for it is named and rejected rather than misread. The
// zero value is invalid.
type FailurePolicy int

// The failure policies.
const (
	FailClosed FailurePolicy = iota + 1
	FailOpen
	// LocalFallback: while the store is unreachable (Unavailable, never
	// Indeterminate or Incompatible), decide locally with the limit divided
	// by FallbackInstances; see Policy.FallbackShare.
	LocalFallback
)

// MaxFallbackInstances bounds PolicySpec.FallbackInstances.
const MaxFallbackInstances = 1 << 20

// String returns the wire name: "fail-closed", "fail-open" or
// "local-fallback".
func (f FailurePolicy) String() string {
	switch f {
	case FailClosed:
		return "fail-closed"
	case FailOpen:
		return "fail-open"
	case LocalFallback:
		return "local-fallback"
	}
	return fmt.Sprintf("FailurePolicy(%d)", int(f))
}

// ParseFailurePolicy maps a wire name to a FailurePolicy. It accepts
// "fail-open" so that NewPolicy can reject it with a precise reason.
func ParseFailurePolicy(s string) (FailurePolicy, error) {
	switch s {
	case "fail-closed":
		return FailClosed, nil
	case "fail-open":
		return FailOpen, nil
	case "local-fallback":
		return LocalFallback, nil
	}
	return 0, fmt.Errorf("%w: failure policy %q is not fail-closed or local-fallback", ErrUnsupported, bounded(s))
}

// Policy-construction errors. Every *PolicyError wraps ErrInvalidPolicy and
// exactly one of the others or ErrInvalidPolicyID.
var (
	ErrInvalidPolicy     = errors.New("invalid rate-limit policy")
	ErrAlgorithmMismatch = errors.New("algorithm does not match the parameters")
	ErrNonPositive       = errors.New("value must be positive")
	ErrNotWholeMillis    = errors.New("duration must be a whole number of milliseconds")
	ErrArithmeticRange   = errors.New("value or intermediate result exceeds the exact integer range")
	ErrMaxCostAboveLimit = errors.New("max cost exceeds the limit or capacity")
	ErrUnsupported       = errors.New("not supported in v1")
	ErrDedupWindow       = errors.New("dedup window above the maximum")
	ErrDedupMaxReplays   = errors.New("dedup max replays out of range")
	ErrLimitAboveCap     = errors.New("limit above the algorithm's cap")
)

// PolicyError names the PolicySpec field at fault and why.
type PolicyError struct {
	Field  string // e.g. "Params.Limit"
	Reason string // human-readable detail with the offending value
	Err    error  // one of the sentinel errors above
}

// Error renders "policy <field>: <sentinel>: <reason>".
func (e *PolicyError) Error() string {
	return "policy " + e.Field + ": " + e.Err.Error() + ": " + e.Reason
}

// Unwrap exposes ErrInvalidPolicy and the specific sentinel to errors.Is.
func (e *PolicyError) Unwrap() []error { return []error{ErrInvalidPolicy, e.Err} }

// PolicySpec is the mutable input to NewPolicy. NewPolicy copies what it
// keeps, so changing a spec afterwards changes no Policy.
type PolicySpec struct {
	ID PolicyID
	// Revision is >= 1; a new revision rolls to new state (it is part of the
	// state key and of the stored state).
	Revision  int64
	Algorithm Algorithm
	// Params is a FixedWindow, SlidingWindowCounter, TokenBucket, GCRA,
	// SlidingLog or LeakyBucket value (not a pointer) and must match
	// Algorithm.
	Params Params
	// MaxCost is the largest Request.Cost accepted, 1..limit (or capacity,
	// or burst).
	MaxCost int64
	// CleanupGrace is added to the state's reset horizon to form its TTL;
	// whole milliseconds, at least 1ms.
	CleanupGrace time.Duration
	// MaxClockRegression is how far server time may go backwards and still be
	// clamped to the last observed instant; whole milliseconds, and 0 refuses
	// any regression.
	MaxClockRegression time.Duration
	// FailurePolicy is FailClosed or LocalFallback.
	FailurePolicy FailurePolicy
	// FallbackInstances is the number of service instances sharing the
	// limit, 1..MaxFallbackInstances, with LocalFallback; it must be 0
	// otherwise.
	FallbackInstances int64
	// DedupWindow, when not 0, enables evaluation dedup: a Request may carry
	// an EvaluationID, and a repeat of an admitted ID within DedupWindow
	// answers the recorded decision and consumes nothing. Whole
	// milliseconds, 0 (off) or 1ms..MaxDedupWindow.
	DedupWindow time.Duration
	// DedupMaxReplays is how many times, within DedupWindow, an admitted
	// evaluation ID is answered as a free replay; a further reuse of the ID
	// is charged like a new request. nil means DefaultDedupMaxReplays;
	// otherwise 0..MaxDedupMaxReplays (0 charges every reuse). Only a
	// policy with a DedupWindow may set it.
	DedupMaxReplays *int64
	// Scope is whose budget the policy counts: ScopeSubject (the zero
	// value, one budget per subject) or ScopeGlobal (one budget shared by
	// every subject; ADR 0027). A global policy cannot have a dedup window
	// (its records are per subject, in the subject's slot).
	Scope Scope
}

// DefaultDedupMaxReplays is a dedup policy's DedupMaxReplays when the spec
// leaves it nil (the policy file's "dedupMaxReplays" default).
const DefaultDedupMaxReplays = 1

// MaxDedupMaxReplays bounds PolicySpec.DedupMaxReplays: the handler runs at
// most 1 + MaxDedupMaxReplays times per admitted request.
const MaxDedupMaxReplays = 16

// MaxDedupWindow bounds PolicySpec.DedupWindow: how long a subject's dedup
// records are kept (docs/degraded-mode.md has the memory per subject).
const MaxDedupWindow = 24 * time.Hour

// Policy is an immutable, validated rate-limit policy. Build it with
// NewPolicy; the zero value is invalid (IsZero) and no provider accepts it.
// It has no exported fields and its getters return copies, so copies are
// independent and safe for concurrent use.
type Policy struct {
	id                 PolicyID
	revision           int64
	params             Params // always a value type, never a pointer
	maxCost            int64
	cleanupGraceMs     int64
	maxClockRegression int64
	failurePolicy      FailurePolicy
	fallbackInstances  int64
	dedupWindowMs      int64
	dedupMaxReplays    int64
	scope              Scope
}

// NewPolicy validates spec and freezes it. It returns every violation joined
// (each a *PolicyError); the integer bounds it enforces are formulas A2-A4,
// F1-F2, S1-S3, T1-T2, G1-G2 and L1-L2 of docs/arithmetic.md.
func NewPolicy(spec PolicySpec) (Policy, error) {
	v := &policyValidator{}
	if err := spec.ID.Validate(); err != nil {
		v.fail("ID", ErrInvalidPolicyID, "%q must match ^[a-z0-9][a-z0-9._-]{0,63}$", bounded(string(spec.ID)))
	}
	v.positive("Revision", spec.Revision)
	// A2: the revision is sent to and stored by the programs.
	v.within("Revision", spec.Revision, MaxExactInt)
	grace := v.millis("CleanupGrace", spec.CleanupGrace, false)
	// A3 (regression <= MaxHorizonMillis) holds by type: no time.Duration is
	// longer than MaxHorizonMillis milliseconds.
	regression := v.millis("MaxClockRegression", spec.MaxClockRegression, true)
	switch spec.FailurePolicy {
	case FailClosed:
		if spec.FallbackInstances != 0 {
			v.fail("FallbackInstances", ErrUnsupported, "%d: only a local-fallback policy has fallback instances", spec.FallbackInstances)
		}
	case LocalFallback:
		if spec.FallbackInstances < 1 || spec.FallbackInstances > MaxFallbackInstances {
			v.fail("FallbackInstances", ErrNonPositive, "%d: a local-fallback policy needs 1..%d instances", spec.FallbackInstances, MaxFallbackInstances)
		}
	case FailOpen:
		v.fail("FailurePolicy", ErrUnsupported, "fail-open is not supported: the limiter fails closed")
	default:
		v.fail("FailurePolicy", ErrUnsupported, "%v is not fail-closed or local-fallback", spec.FailurePolicy)
	}
	var dedup int64
	if spec.DedupWindow != 0 {
		dedup = v.millis("DedupWindow", spec.DedupWindow, false)
		if spec.DedupWindow > MaxDedupWindow {
			v.fail("DedupWindow", ErrDedupWindow, "%v > %v", spec.DedupWindow, MaxDedupWindow)
		}
		if spec.Algorithm == AlgorithmLeakyBucket {
			// A replay would answer an admission whose slot the caller
			// may have given back (Refunder): a free pass (ADR 0028).
			v.fail("DedupWindow", ErrUnsupported, "a leaky_bucket policy cannot have a dedup window (a replayed admission would skip the queue)")
		}
	}
	var replays int64
	switch {
	case spec.DedupMaxReplays == nil:
		if spec.DedupWindow != 0 {
			replays = DefaultDedupMaxReplays
		}
	case spec.DedupWindow == 0:
		v.fail("DedupMaxReplays", ErrUnsupported, "%d: only a policy with a dedup window replays", *spec.DedupMaxReplays)
	case *spec.DedupMaxReplays < 0 || *spec.DedupMaxReplays > MaxDedupMaxReplays:
		v.fail("DedupMaxReplays", ErrDedupMaxReplays, "%d is not 0..%d", *spec.DedupMaxReplays, MaxDedupMaxReplays)
	default:
		replays = *spec.DedupMaxReplays
	}
	switch spec.Scope {
	case ScopeSubject:
	case ScopeGlobal:
		if spec.DedupWindow != 0 {
			v.fail("Scope", ErrUnsupported, "a global policy cannot have a dedup window (dedup records are per subject)")
		}
	default:
		v.fail("Scope", ErrUnsupported, "%d is not ScopeSubject or ScopeGlobal", int(spec.Scope))
	}
	v.positive("MaxCost", spec.MaxCost)
	if !spec.Algorithm.Valid() {
		v.fail("Algorithm", ErrUnsupported, "%v is not fixed_window, sliding_window_counter, token_bucket, gcra, sliding_log or leaky_bucket", spec.Algorithm)
	}

	var limit int64
	var paramsAlg Algorithm
	params := spec.Params
	switch p := spec.Params.(type) {
	case nil:
		v.fail("Params", ErrAlgorithmMismatch, "no parameters given for %v", spec.Algorithm)
	case FixedWindow:
		limit, paramsAlg = v.fixedWindow(p, grace), AlgorithmFixedWindow
	case SlidingWindowCounter:
		limit, paramsAlg = v.slidingWindowCounter(p, grace), AlgorithmSlidingWindowCounter
	case TokenBucket:
		var tb TokenBucket
		limit, tb = v.tokenBucket(p, grace)
		params, paramsAlg = tb, AlgorithmTokenBucket
	case GCRA:
		limit, paramsAlg = v.gcra(p, grace), AlgorithmGCRA
	case SlidingLog:
		limit, paramsAlg = v.slidingLog(p, grace), AlgorithmSlidingLog
	case LeakyBucket:
		limit, paramsAlg = v.leakyBucket(p, grace), AlgorithmLeakyBucket
	default:
		// A pointer to a params type also satisfies Params; keeping it would
		// let the caller mutate a frozen policy.
		v.fail("Params", ErrUnsupported, "%T: parameters must be a FixedWindow, SlidingWindowCounter, TokenBucket, GCRA, SlidingLog or LeakyBucket value", p)
	}
	if paramsAlg != 0 && spec.Algorithm.Valid() && spec.Algorithm != paramsAlg {
		v.fail("Algorithm", ErrAlgorithmMismatch, "algorithm %v with %v parameters", spec.Algorithm, paramsAlg)
	}
	// A4: every cost is at most the limit, which F1, S1, T1 and G1 rely on.
	// For GCRA the limit is the burst: a larger cost could never be
	// admitted, so it is refused as a request error, never answered with a
	// retry-after that cannot succeed.
	if limit > 0 && spec.MaxCost > limit {
		v.fail("MaxCost", ErrMaxCostAboveLimit, "%d > %d", spec.MaxCost, limit)
	}
	if err := errors.Join(v.errs...); err != nil {
		return Policy{}, err
	}
	return Policy{
		id:                 spec.ID,
		revision:           spec.Revision,
		params:             params,
		maxCost:            spec.MaxCost,
		cleanupGraceMs:     grace,
		maxClockRegression: regression,
		failurePolicy:      spec.FailurePolicy,
		fallbackInstances:  spec.FallbackInstances,
		dedupWindowMs:      dedup,
		dedupMaxReplays:    replays,
		scope:              spec.Scope,
	}, nil
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

// ID is the policy's identifier.
func (p Policy) ID() PolicyID { return p.id }

// Revision is the policy revision; a new revision rolls to new state.
func (p Policy) Revision() int64 { return p.revision }

// Algorithm is the algorithm of Params.
func (p Policy) Algorithm() Algorithm {
	if p.params == nil {
		return 0
	}
	return p.params.Algorithm()
}

// Params returns a copy of the algorithm parameters: the spec's, except for
// a token bucket whose capacity * refill period exceeds MaxExactInt but
// whose reduced rate does not (T1), which is held, and sent to the programs,
// as the identical reduced rate (RefillTokens and RefillPeriod divided by
// their greatest common divisor).
func (p Policy) Params() Params { return p.params }

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

// Scope is whose budget the policy counts (PolicySpec.Scope).
func (p Policy) Scope() Scope { return p.scope }

// Subject is the subject whose budget a request of d counts against under
// p: d itself for ScopeSubject, GlobalSubject for ScopeGlobal. Providers
// derive state keys, cache entries and local tables from it.
func (p Policy) Subject(d SubjectDigest) SubjectDigest {
	if p.scope == ScopeGlobal {
		return GlobalSubject
	}
	return d
}

// MaxCost is the largest accepted Request.Cost.
func (p Policy) MaxCost() int64 { return p.maxCost }

// CleanupGrace is added to the reset horizon to form the state TTL.
func (p Policy) CleanupGrace() time.Duration {
	return time.Duration(p.cleanupGraceMs) * time.Millisecond
}

// MaxClockRegression is the tolerated backward movement of server time.
func (p Policy) MaxClockRegression() time.Duration {
	return time.Duration(p.maxClockRegression) * time.Millisecond
}

// FailurePolicy is FailClosed or LocalFallback for a valid policy.
func (p Policy) FailurePolicy() FailurePolicy {
	if p.params == nil {
		return 0
	}
	return p.failurePolicy
}

// FallbackInstances is the number of instances sharing the limit of a
// LocalFallback policy, and 0 for any other.
func (p Policy) FallbackInstances() int64 { return p.fallbackInstances }

// DedupWindow is how long an admitted evaluation's ID is remembered; 0 when
// the policy has no dedup (an EvaluationID is then refused).
func (p Policy) DedupWindow() time.Duration {
	return time.Duration(p.dedupWindowMs) * time.Millisecond
}

// DedupMaxReplays is how many times an admitted evaluation ID is answered
// as a free replay within the dedup window (then each reuse is charged);
// 0 when the policy has no dedup window.
func (p Policy) DedupMaxReplays() int64 { return p.dedupMaxReplays }

// FallbackShare is one instance's share of the limit (or capacity) while it
// decides locally: Limit / FallbackInstances rounded down, at least 1; 0
// unless the policy is LocalFallback.
func (p Policy) FallbackShare() int64 {
	if p.failurePolicy != LocalFallback || p.fallbackInstances < 1 {
		return 0
	}
	return max(1, p.Limit()/p.fallbackInstances)
}

// Certainty is Certain for fixed window, token bucket, GCRA, sliding log and
// leaky bucket and ApproximateAlgorithm for the sliding-window counter.
func (p Policy) Certainty() Certainty {
	switch p.Algorithm() {
	case AlgorithmFixedWindow, AlgorithmTokenBucket, AlgorithmGCRA, AlgorithmSlidingLog, AlgorithmLeakyBucket:
		return Certain
	case AlgorithmSlidingWindowCounter:
		return ApproximateAlgorithm
	}
	return 0
}

// IsZero reports whether p is the zero Policy (not built by NewPolicy).
func (p Policy) IsZero() bool { return p.params == nil }

// String describes the policy; it holds no secret.
func (p Policy) String() string {
	if p.IsZero() {
		return "Policy(invalid)"
	}
	return fmt.Sprintf("Policy(%s rev %d %v %+v maxCost=%d)", p.id, p.revision, p.Algorithm(), p.params, p.maxCost)
}

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
