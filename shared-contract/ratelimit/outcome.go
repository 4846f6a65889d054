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
