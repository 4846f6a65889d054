package ratelimit

import (
	"fmt"
	"time"
)

// Outcome is the sealed result of EdgePort.Evaluate: exactly one of the values
// Evaluated, Unavailable, Indeterminate or Incompatible. The unexported marker
// method keeps other packages from declaring a variant, so a type switch over
// these four is exhaustive. Variants are values: a pointer to one (or a
// foreign struct embedding one) also satisfies the interface but is not a
// valid Outcome, and Admitted fails closed on it.
//
//sumtype:decl
type Outcome interface {
	// Kind names the variant; it is stable and used in metrics.
	Kind() OutcomeKind
	sealedOutcome()
}

// OutcomeKind is the stable name of an Outcome variant.
type OutcomeKind string

// The outcome kinds.
const (
	KindEvaluated     OutcomeKind = "evaluated"
	KindUnavailable   OutcomeKind = "unavailable"
	KindIndeterminate OutcomeKind = "indeterminate"
	KindIncompatible  OutcomeKind = "incompatible"
)

// KindUnknown is not an Outcome variant: it is the one name the edge (problem
// body, Observation) and the metrics decorator (kind label) report for a nil
// outcome or a value of a foreign type, which fails closed.
const KindUnknown OutcomeKind = "unknown"

// Evaluated means the program ran and answered: Decision says allow or deny.
type Evaluated struct {
	Decision Decision
	// Members is set by EdgePort.EvaluateSet only: the decision of every member
	// decided, in SetRequest.Members order, and Decision is
	// Members[Deciding(Members)]. When a member denied, nothing was
	// consumed in any member, and the members that would have admitted
	// report what they answered; a member after the denying one may be
	// absent (not asked). Nil for a single-policy evaluation.
	Members []Decision
}

// Unavailable means no decision was made and it is known that no state was
// changed: the request was rejected before anything was sent, the server
// refused before the program ran, or the server clock was unsafe.
type Unavailable struct {
	PolicyID PolicyID
	// RetryAfter is a hint for the caller's Retry-After; never negative.
	RetryAfter time.Duration
	Category   Category
	// Cause is the underlying error for logs, if any. It never holds a
	// secret or a subject.
	Cause error
}

// Indeterminate means the request may have reached the server and its effect
// is unknown (a timeout or a lost connection after the first byte was
// written). State may have changed; the request is not admitted.
type Indeterminate struct {
	PolicyID   PolicyID
	RetryAfter time.Duration
	// Category refines why the outcome is unknown (CategoryTimeout,
	// CategoryConnectionLost, CategoryCancelled). It is an addition to the
	// contract recorded in docs/adr/0002-contract-refinements.md.
	Category Category
	Cause    error
}

// Incompatible means state, program, reply or server version did not match
// what this provider expects; nothing is admitted.
type Incompatible struct {
	PolicyID PolicyID
	Category Category
	Cause    error
}

// Kind implements Outcome.
func (Evaluated) Kind() OutcomeKind { return KindEvaluated }

// Kind implements Outcome.
func (Unavailable) Kind() OutcomeKind { return KindUnavailable }

// Kind implements Outcome.
func (Indeterminate) Kind() OutcomeKind { return KindIndeterminate }

// Kind implements Outcome.
func (Incompatible) Kind() OutcomeKind { return KindIncompatible }

func (Evaluated) sealedOutcome()     {}
func (Unavailable) sealedOutcome()   {}
func (Indeterminate) sealedOutcome() {}
func (Incompatible) sealedOutcome()  {}

// Admitted reports whether o admits the request: true only for an Evaluated
// value whose decision is allowed. Everything else, including nil, a denied
// decision, every failure and any non-value variant, fails closed.
func Admitted(o Outcome) bool {
	e, ok := o.(Evaluated)
	return ok && e.Decision.Allowed
}

// CategoryOf returns the category of an Unavailable, Indeterminate or
// Incompatible value, and "" for Evaluated, nil and anything else.
func CategoryOf(o Outcome) Category {
	switch v := o.(type) {
	case Evaluated:
		return ""
	case Unavailable:
		return v.Category
	case Indeterminate:
		return v.Category
	case Incompatible:
		return v.Category
	}
	return ""
}

// PolicyOf returns the policy an outcome names: the decision's PolicyID
// for Evaluated (for a policy set, the member that speaks for it), the
// PolicyID of a failure, and "" for nil and anything else.
func PolicyOf(o Outcome) PolicyID {
	switch v := o.(type) {
	case Evaluated:
		return v.Decision.PolicyID
	case Unavailable:
		return v.PolicyID
	case Indeterminate:
		return v.PolicyID
	case Incompatible:
		return v.PolicyID
	}
	return ""
}

// String renders the outcome for logs without causes' internals.
func (o Unavailable) String() string {
	return fmt.Sprintf("unavailable(%s, %s, retry after %v)", o.PolicyID, o.Category, o.RetryAfter)
}

// String renders the outcome for logs.
func (o Indeterminate) String() string {
	return fmt.Sprintf("indeterminate(%s, %s, retry after %v)", o.PolicyID, o.Category, o.RetryAfter)
}

// String renders the outcome for logs.
func (o Incompatible) String() string {
	return fmt.Sprintf("incompatible(%s, %s)", o.PolicyID, o.Category)
}

// String renders the outcome for logs.
func (o Evaluated) String() string { return "evaluated(" + o.Decision.String() + ")" }

// Source says where a decision was made.
type Source int

// The decision sources. The zero value is invalid.
const (
	// GlobalRedis: the shared Redis coordination state decided.
	GlobalRedis Source = iota + 1
	// LocalEmergency: the coordination store was unreachable and this
	// instance decided alone with its share of a LocalFallback policy's
	// limit (docs/degraded-mode.md).
	LocalEmergency
)

// String returns "global_redis" or "local_emergency".
func (s Source) String() string {
	switch s {
	case GlobalRedis:
		return "global_redis"
	case LocalEmergency:
		return "local_emergency"
	}
	return fmt.Sprintf("Source(%d)", int(s))
}

// Certainty says how exact a decision is with respect to the policy.
type Certainty int

// The certainties. The zero value is invalid.
const (
	// Certain: the algorithm is exact (fixed window, token bucket).
	Certain Certainty = iota + 1
	// ApproximateAlgorithm: the algorithm estimates (sliding-window
	// counter); the estimate is conservative.
	ApproximateAlgorithm
	// ApproximateLocal: a LocalEmergency decision: exact for this
	// instance's share, approximate for the global limit (other instances
	// decide on their own shares; docs/degraded-mode.md has the bound).
	ApproximateLocal
)

// String returns "certain", "approximate_algorithm" or
// "approximate_local".
func (c Certainty) String() string {
	switch c {
	case Certain:
		return "certain"
	case ApproximateAlgorithm:
		return "approximate_algorithm"
	case ApproximateLocal:
		return "approximate_local"
	}
	return fmt.Sprintf("Certainty(%d)", int(c))
}

// Decision is the answer of an evaluated policy. Denied is a Decision, not an
// error.
type Decision struct {
	Allowed bool
	// Limit is the policy's limit or capacity.
	Limit int64
	// Remaining is what is left after this request (0..Limit).
	Remaining int64
	// RetryAfter is 0 when allowed; when denied, the wait after which the
	// same request with no other traffic is allowed.
	RetryAfter time.Duration
	// ResetAt is the server instant at which the state is back to full.
	ResetAt time.Time
	// ServerNow is the server instant the decision was taken at (the
	// coordination server's clock, like ResetAt), so that the time to
	// reset, ResetAt - ServerNow, needs no other clock. Zero when the port
	// does not know it; see ResetAfter.
	ServerNow      time.Time
	PolicyID       PolicyID
	PolicyRevision int64
	Source         Source
	Certainty      Certainty
	// Delay is set on an allowed decision of a leaky bucket (ADR 0028):
	// how long after the decision the request's slot comes, on the server's
	// clock. The caller holds the request that long before acting on it,
	// or gives the slot back with Receipt when it will not wait. 0 means go
	// now; it is always 0 for the other algorithms and on a denial.
	Delay time.Duration
	// Receipt, set on an allowed decision that consumed (not a replay),
	// lets the caller give that admission back (EdgePort.Refund, ADR 0025); the
	// zero Receipt otherwise.
	Receipt Receipt
	// Refunded is set by EdgePort.Refund only: the units the refund gave
	// back (0: nothing was left to give back, or the receipt is stale).
	Refunded int64
	// Replayed is true when the port answered a decision it had recorded
	// for the request's EvaluationID within the policy's dedup window (at
	// most Policy.DedupMaxReplays times per ID): the same decision,
	// ServerNow and ResetAt included, and nothing consumed by this call.
	Replayed bool
}

// ResetAfter is the time from the decision to ResetAt on the server's own
// clock, ResetAt - ServerNow, at least 0; ok is false when ServerNow is zero
// (the caller then has only its own clock to measure ResetAt against).
func (d Decision) ResetAfter() (wait time.Duration, ok bool) {
	if d.ServerNow.IsZero() {
		return 0, false
	}
	return max(d.ResetAt.Sub(d.ServerNow), 0), true
}

// String renders the decision for logs.
func (d Decision) String() string {
	verdict := "denied"
	if d.Allowed {
		verdict = "allowed"
	}
	if d.Delay > 0 {
		return fmt.Sprintf("%s %s rev %d remaining %d/%d delay %v", verdict, d.PolicyID, d.PolicyRevision, d.Remaining, d.Limit, d.Delay)
	}
	return fmt.Sprintf("%s %s rev %d remaining %d/%d retry %v", verdict, d.PolicyID, d.PolicyRevision, d.Remaining, d.Limit, d.RetryAfter)
}

// Receipt is what an admission returned so that its caller can give it
// back (ADR 0025): the policy and revision that admitted, the units it took
// and the server instant it admitted at, and which source decided it. It
// names no subject (the caller passes its Request again) and is four
// integers and an ID. Callers treat it as opaque: only the port that
// issued it reads it.
type Receipt struct {
	policy   PolicyID
	revision int64
	cost     int64
	atMillis int64
	source   Source
}

// NewReceipt is for providers: the receipt of an admission of cost units
// under policy's revision at atMillis (server milliseconds), decided by
// source.
func NewReceipt(policy PolicyID, revision, cost, atMillis int64, source Source) Receipt {
	return Receipt{policy: policy, revision: revision, cost: cost, atMillis: atMillis, source: source}
}

// WithCost is r with the units taken set to cost (a provider knows the
// request's cost where it builds the decision's receipt).
func (r Receipt) WithCost(cost int64) Receipt { r.cost = cost; return r }

// IsZero reports whether r is the zero Receipt (nothing to give back).
func (r Receipt) IsZero() bool { return r == Receipt{} }

// PolicyID is the policy that admitted.
func (r Receipt) PolicyID() PolicyID { return r.policy }

// Revision is the policy revision that admitted.
func (r Receipt) Revision() int64 { return r.revision }

// Cost is the units the admission took.
func (r Receipt) Cost() int64 { return r.cost }

// AtMillis is the server instant the admission was made at.
func (r Receipt) AtMillis() int64 { return r.atMillis }

// Source is who decided the admission: a receipt is given back only by a
// port of the same source.
func (r Receipt) Source() Source { return r.source }

// String renders the receipt for logs (it holds no subject).
func (r Receipt) String() string {
	return fmt.Sprintf("receipt(%s rev %d cost %d at %d %s)", r.policy, r.revision, r.cost, r.atMillis, r.source)
}
