package ratelimit

import (
	"errors"
	"fmt"
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

// Enforcement is Enforce or Shadow for a valid policy (0 for the zero
// Policy): whether a caller refuses a request this policy denies.
func (p Policy) Enforcement() Enforcement { return p.enforcement }

// Shadow reports whether the policy is a shadow policy: decided and
// counted, never refusing a request (ADR 0037).
func (p Policy) Shadow() bool { return p.enforcement == Shadow }

// Holds reports whether an admission of the policy holds its units until
// it is given back (a concurrency limit; AlgorithmSpec.Holds, ADR 0041).
func (p Policy) Holds() bool {
	s, ok := p.Algorithm().Spec()
	return ok && s.Holds
}

// MaxCost is the largest accepted Request.Cost.
func (p Policy) MaxCost() int64 { return p.maxCost }

// Lease is the policy's lease (ADR 0042); ok is false when it has none.
func (p Policy) Lease() (l Lease, ok bool) {
	if p.lease == nil {
		return Lease{}, false
	}
	return *p.lease, true
}

// requestMaxCost is the largest Request.Cost: MaxCost, or for a lease's
// reservation (lease) LeaseMaxCost.
func (p Policy) requestMaxCost(lease bool) int64 {
	if p.lease != nil && lease {
		return max(p.maxCost, p.lease.MaxUnits(p.Limit()))
	}
	return p.maxCost
}

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

// FallbackPolicy returns the policy one instance enforces locally for the
// LocalFallback policy p: the same ID, revision, algorithm and windows with
// the limit (capacity, burst) p.FallbackShare(), MaxCost at most that, and
// the rate divided by FallbackInstances where the algorithm has one (each
// parameter type says how), failing closed.
func (p Policy) FallbackPolicy() (Policy, error) {
	share := p.FallbackShare()
	if share < 1 {
		return Policy{}, fmt.Errorf("policy %q is not local-fallback", p.ID())
	}
	candidates, err := p.params.fallbackShares(share, p.fallbackInstances)
	if err != nil {
		return Policy{}, fmt.Errorf("policy %q: %w", p.ID(), err)
	}
	spec := PolicySpec{
		ID: p.ID(), Revision: p.Revision(), Algorithm: p.Algorithm(),
		MaxCost: min(p.MaxCost(), share), CleanupGrace: p.CleanupGrace(), MaxClockRegression: p.MaxClockRegression(),
		FailurePolicy: FailClosed, Enforcement: p.enforcement,
	}
	for i, params := range candidates {
		spec.Params = params
		if sp, err := NewPolicy(spec); err == nil || i == len(candidates)-1 {
			return sp, err
		}
	}
	return Policy{}, fmt.Errorf("policy %q: no local share", p.ID())
}

// Certainty is the certainty of the policy's decisions, its algorithm's
// (AlgorithmSpec.Certainty): Certain for fixed window, token bucket, GCRA,
// sliding log and leaky bucket and ApproximateAlgorithm for the
// sliding-window counter; 0 for the zero Policy.
func (p Policy) Certainty() Certainty {
	s, _ := p.Algorithm().Spec()
	return s.Certainty
}

// IsZero reports whether p is the zero Policy (not built by NewPolicy).
func (p Policy) IsZero() bool { return p.params == nil }

// String describes the policy; it holds no secret.
func (p Policy) String() string {
	if p.IsZero() {
		return "Policy(invalid)"
	}
	shadow := ""
	if p.Shadow() {
		shadow = " shadow"
	}
	return fmt.Sprintf("Policy(%s rev %d %v %+v maxCost=%d%s)", p.id, p.revision, p.Algorithm(), p.params, p.maxCost, shadow)
}
