package ratelimit

import (
	"fmt"
	"time"
)

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
