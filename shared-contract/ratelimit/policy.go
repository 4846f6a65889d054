package ratelimit

import (
	"errors"
	"time"
)

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
	// Enforcement is Enforce (a denial refuses the request) or Shadow
	// (decided and counted, never refusing; ADR 0037). The zero value
	// means Enforce. It changes no key, program or decision.
	Enforcement Enforcement
	// Lease, optional, lets an instance reserve several units at once and
	// admit from them locally (ADR 0042); nil: every request is decided by
	// the coordination server. Only an algorithm whose AlgorithmSpec has
	// no NoLease reason leases.
	Lease *Lease
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
	params             variant // always a value type, never a pointer
	maxCost            int64
	cleanupGraceMs     int64
	maxClockRegression int64
	failurePolicy      FailurePolicy
	fallbackInstances  int64
	dedupWindowMs      int64
	dedupMaxReplays    int64
	scope              Scope
	enforcement        Enforcement
	lease              *Lease // nil: none; never shared with the spec
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
		if s, ok := spec.Algorithm.Spec(); ok && s.NoDedup != "" {
			v.fail("DedupWindow", ErrUnsupported, "a %s policy cannot have a dedup window (%s)", s.Name, s.NoDedup)
		}
	}
	var replays int64
	switch {
	case spec.DedupMaxReplays == nil:
		if spec.DedupWindow != 0 {
			replays = DefaultDedupMaxReplays
		}
	default:
		// The one replay rule (replays.go), in NewPolicy's words.
		switch err := CheckDedupMaxReplays(spec.DedupWindow != 0, *spec.DedupMaxReplays); {
		case errors.Is(err, ErrReplaysWithoutWindow):
			v.fail("DedupMaxReplays", ErrUnsupported, "%d: only a policy with a dedup window replays", *spec.DedupMaxReplays)
		case err != nil:
			v.fail("DedupMaxReplays", ErrDedupMaxReplays, "%d is not 0..%d", *spec.DedupMaxReplays, MaxDedupMaxReplays)
		default:
			replays = *spec.DedupMaxReplays
		}
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
	enforcement := spec.Enforcement
	switch enforcement {
	case 0:
		enforcement = Enforce
	case Enforce, Shadow:
	default:
		v.fail("Enforcement", ErrUnsupported, "%v is not Enforce or Shadow", spec.Enforcement)
	}
	if s, ok := spec.Algorithm.Spec(); ok && s.Holds && enforcement == Shadow {
		v.fail("Enforcement", ErrUnsupported, "a %s policy cannot be a shadow policy: a shadow's admission is never given back, so its slots would stay held", s.Name)
	}
	v.positive("MaxCost", spec.MaxCost)
	if !spec.Algorithm.Valid() {
		v.fail("Algorithm", ErrUnsupported, "%v is not %s", spec.Algorithm, algorithmList(func(s *AlgorithmSpec) string { return s.Name }))
	}

	var limit int64
	var paramsAlg Algorithm
	var params variant
	switch q, ok := variantOf(spec.Params); {
	case spec.Params == nil:
		v.fail("Params", ErrAlgorithmMismatch, "no parameters given for %v", spec.Algorithm)
	case !ok:
		// A pointer to a params type also satisfies Params; keeping it would
		// let the caller mutate a frozen policy.
		v.fail("Params", ErrUnsupported, "%T: parameters must be a %s value", spec.Params, algorithmList(func(s *AlgorithmSpec) string { return s.typeName }))
	default:
		limit, params = q.validate(v, grace)
		paramsAlg = q.Algorithm()
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
	var lease *Lease
	if l, ok := validateLease(v, spec, windowOf(params, len(v.errs) == 0)); ok {
		lease = &l
	}
	if err := errors.Join(v.errs...); err != nil {
		return Policy{}, err
	}
	return Policy{
		lease:              lease,
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
		enforcement:        enforcement,
	}, nil
}
