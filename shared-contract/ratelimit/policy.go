package ratelimit

import (
	"errors"
	"fmt"
	"time"
)

// FailurePolicy says what a caller does when no decision can be had. Only
// FailClosed is supported in v1; FailOpen exists so that a configuration
// asking for it is named and rejected rather than misread. The zero value is
// invalid.
type FailurePolicy int

// The failure policies.
const (
	FailClosed FailurePolicy = iota + 1
	FailOpen
)

// String returns the wire name: "fail-closed" or "fail-open".
func (f FailurePolicy) String() string {
	switch f {
	case FailClosed:
		return "fail-closed"
	case FailOpen:
		return "fail-open"
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
	}
	return 0, fmt.Errorf("%w: failure policy %q is not fail-closed", ErrUnsupported, bounded(s))
}

// Policy-construction errors. Every *PolicyError wraps ErrInvalidPolicy and
// exactly one of the others.
var (
	ErrInvalidPolicy     = errors.New("invalid rate-limit policy")
	ErrAlgorithmMismatch = errors.New("algorithm does not match the parameters")
	ErrNonPositive       = errors.New("value must be positive")
	ErrNotWholeMillis    = errors.New("duration must be a whole number of milliseconds")
	ErrArithmeticRange   = errors.New("value or intermediate result exceeds 2^53-1")
	ErrMaxCostAboveLimit = errors.New("max cost exceeds the limit or capacity")
	ErrUnsupported       = errors.New("not supported in v1")
)

// PolicyError names the PolicySpec field at fault and why.
type PolicyError struct {
	Field  string // e.g. "Params.Limit"
	Reason string // human-readable detail with the offending value
	Err    error  // one of the sentinel errors above
}

func (e *PolicyError) Error() string {
	return "policy " + e.Field + ": " + e.Err.Error() + ": " + e.Reason
}

// Unwrap exposes ErrInvalidPolicy and the specific sentinel to errors.Is.
func (e *PolicyError) Unwrap() []error { return []error{ErrInvalidPolicy, e.Err} }

// PolicySpec is the mutable input to NewPolicy.
type PolicySpec struct {
	ID        PolicyID
	Revision  int64
	Algorithm Algorithm
	// Params is FixedWindow, SlidingWindowCounter or TokenBucket and must
	// match Algorithm.
	Params  Params
	MaxCost int64
	// CleanupGrace is added to the state's reset horizon to form its TTL.
	CleanupGrace time.Duration
	// MaxClockRegression is how far server time may go backwards and still be
	// clamped to the last observed instant; 0 refuses any regression.
	MaxClockRegression time.Duration
	FailurePolicy      FailurePolicy
	// Dedup must be false: evaluation deduplication is not supported in v1.
	Dedup bool
}

// Policy is an immutable, validated rate-limit policy. Build it with
// NewPolicy; the zero value is invalid and no provider accepts it. Copies are
// independent and safe for concurrent use.
type Policy struct {
	id                 PolicyID
	revision           int64
	params             Params
	maxCost            int64
	cleanupGraceMs     int64
	maxClockRegression int64
}

// NewPolicy validates spec and freezes it. It returns every violation joined
// (each a *PolicyError); the integer bounds it enforces are those of
// docs/arithmetic.md.
func NewPolicy(spec PolicySpec) (Policy, error) {
	v := &policyValidator{}
	if err := spec.ID.Validate(); err != nil {
		v.fail("ID", ErrInvalidPolicyID, "%q", bounded(string(spec.ID)))
	}
	v.positive("Revision", spec.Revision)
	v.within("Revision", spec.Revision, MaxExactInt)
	grace := v.millis("CleanupGrace", spec.CleanupGrace, false)
	regression := v.millis("MaxClockRegression", spec.MaxClockRegression, true)
	// A1: the regression is compared with stored and server instants.
	v.within("MaxClockRegression", regression, MaxHorizonMillis)
	switch spec.FailurePolicy {
	case FailClosed:
	case FailOpen:
		v.fail("FailurePolicy", ErrUnsupported, "fail-open is not supported: the limiter fails closed")
	default:
		v.fail("FailurePolicy", ErrUnsupported, "%v is not fail-closed", spec.FailurePolicy)
	}
	if spec.Dedup {
		v.fail("Dedup", ErrUnsupported, "evaluation deduplication is not supported in v1")
	}
	v.positive("MaxCost", spec.MaxCost)

	var limit int64
	switch p := spec.Params.(type) {
	case nil:
		v.fail("Params", ErrAlgorithmMismatch, "no parameters given for %v", spec.Algorithm)
	case FixedWindow:
		limit = v.fixedWindow(p, grace)
	case SlidingWindowCounter:
		limit = v.slidingWindowCounter(p, grace)
	case TokenBucket:
		limit = v.tokenBucket(p, grace)
	}
	if spec.Params != nil && spec.Algorithm != spec.Params.Algorithm() {
		v.fail("Algorithm", ErrAlgorithmMismatch, "algorithm %v with %T parameters", spec.Algorithm, spec.Params)
	}
	if limit > 0 && spec.MaxCost > limit {
		v.fail("MaxCost", ErrMaxCostAboveLimit, "%d > %d", spec.MaxCost, limit)
	}
	if err := errors.Join(v.errs...); err != nil {
		return Policy{}, err
	}
	return Policy{
		id:                 spec.ID,
		revision:           spec.Revision,
		params:             spec.Params,
		maxCost:            spec.MaxCost,
		cleanupGraceMs:     grace,
		maxClockRegression: regression,
	}, nil
}

// fixedWindow checks formulas F1-F2 of docs/arithmetic.md.
func (v *policyValidator) fixedWindow(p FixedWindow, grace int64) int64 {
	v.positive("Params.Limit", p.Limit)
	w := v.millis("Params.Window", p.Window, false)
	// F1: used + cost <= 2*limit.
	v.within("Params.Limit", p.Limit, MaxExactInt/2)
	// F2: window end and TTL: w + grace <= MaxHorizonMillis.
	v.sumWithin("Params.Window", w, grace, MaxHorizonMillis)
	return p.Limit
}

// slidingWindowCounter checks formulas S1-S3 of docs/arithmetic.md.
func (v *policyValidator) slidingWindowCounter(p SlidingWindowCounter, grace int64) int64 {
	v.positive("Params.Limit", p.Limit)
	w := v.millis("Params.Window", p.Window, false)
	// S1: count * weight <= limit * WeightScale, and the estimate plus cost
	// stays below 3*limit.
	v.within("Params.Limit", p.Limit, MaxExactInt/WeightScale)
	// S2: (window - elapsed) * WeightScale and weight * window <= window *
	// WeightScale.
	v.within("Params.Window", w, MaxExactInt/WeightScale)
	// S3: reset (k+2)*window and TTL: 2*window + grace <= MaxHorizonMillis.
	if w > 0 {
		v.sumWithin("Params.Window", 2*w, grace, MaxHorizonMillis)
	}
	return p.Limit
}

// tokenBucket checks formulas T1-T2 of docs/arithmetic.md.
func (v *policyValidator) tokenBucket(p TokenBucket, grace int64) int64 {
	v.positive("Params.Capacity", p.Capacity)
	v.positive("Params.RefillTokens", p.RefillTokens)
	period := v.millis("Params.RefillPeriod", p.RefillPeriod, false)
	v.within("Params.RefillTokens", p.RefillTokens, MaxExactInt)
	if p.Capacity <= 0 || p.RefillTokens <= 0 || period <= 0 {
		return p.Capacity
	}
	// T1: the scaled level capacity * period bounds every token intermediate.
	if !mulFits(p.Capacity, period) {
		v.fail("Params.Capacity", ErrArithmeticRange, "capacity %d * refill period %d ms > %d", p.Capacity, period, MaxExactInt)
		return p.Capacity
	}
	// T2: time to fill from empty plus grace bounds reset and TTL.
	fill := ceilDiv(p.Capacity*period, p.RefillTokens)
	v.sumWithin("Params.RefillPeriod", fill, grace, MaxHorizonMillis)
	return p.Capacity
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

// Params returns a copy of the algorithm parameters.
func (p Policy) Params() Params { return p.params }

// Limit is the fixed/sliding window limit or the token-bucket capacity.
func (p Policy) Limit() int64 {
	switch q := p.params.(type) {
	case FixedWindow:
		return q.Limit
	case SlidingWindowCounter:
		return q.Limit
	case TokenBucket:
		return q.Capacity
	}
	return 0
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

// FailurePolicy is always FailClosed for a valid policy.
func (p Policy) FailurePolicy() FailurePolicy {
	if p.params == nil {
		return 0
	}
	return FailClosed
}

// Certainty is Certain for fixed window and token bucket and
// ApproximateAlgorithm for the sliding-window counter.
func (p Policy) Certainty() Certainty {
	switch p.Algorithm() {
	case AlgorithmFixedWindow, AlgorithmTokenBucket:
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
	if a >= 0 && b >= 0 && (!addFits(a, b) || a+b > max) {
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
