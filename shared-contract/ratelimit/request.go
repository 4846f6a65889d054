package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// EdgePort is the edge-enforcement port an inbound adapter calls once per
// request. Implementations are safe for concurrent use.
//
// Evaluate never panics and never returns nil. Only an allowed Evaluated
// outcome admits the request (see Admitted); every failure is a value that
// says what the provider knows about whether state changed.
type EdgePort interface {
	Evaluate(ctx context.Context, req Request) Outcome
}

// Request asks for Cost units of the policy PolicyID on behalf of
// SubjectDigest. The zero value is invalid. Printing a Request (fmt, slog)
// never shows the subject digest, only its length.
type Request struct {
	// PolicyID selects the policy; see PolicyID for the syntax.
	PolicyID PolicyID
	// SubjectDigest is the pseudonymized subject; see SubjectDigest.
	SubjectDigest SubjectDigest
	// Cost is the number of units to take, 1..policy.MaxCost().
	Cost int64
	// EvaluationID, optional, names this evaluation so that a retry of it is
	// charged once: 1..MaxEvaluationIDLen characters of [A-Za-z0-9._-]
	// (EvaluationID.Validate). It is accepted only for a policy with a
	// dedup window (Policy.DedupWindow); for any other policy a non-empty ID
	// is refused (ErrDedupNotSupported), as in v1. Within the window, a
	// repeat of an admitted ID answers the recorded decision and consumes
	// nothing, at most Policy.DedupMaxReplays times; a further repeat is
	// charged like a request without an ID (docs/degraded-mode.md). Like
	// the subject digest, it never appears in an error, a log line or a
	// metric.
	EvaluationID EvaluationID
	// Deadline is required: the inbound adapter sets it (the earlier of its
	// evaluation timeout and the context's deadline). A provider's precheck
	// alone decides whether it, or an earlier context deadline, leaves
	// enough time (Unavailable{deadline}, wrapping ErrDeadlinePassed when it
	// has passed). It is an admission precheck against the provider's fixed
	// command timeout, not a per-command timeout.
	Deadline time.Time
}

// EffectiveDeadline is the deadline the evaluation of r is held to: the
// earlier of r.Deadline and ctx's deadline (r.Deadline when ctx has none or
// is nil). It is the one place this rule is written: a provider's precheck
// computes it once per request and everything after the precheck uses
// that value.
func (r Request) EffectiveDeadline(ctx context.Context) time.Time {
	if ctx == nil {
		return r.Deadline
	}
	if d, ok := ctx.Deadline(); ok && d.Before(r.Deadline) {
		return d
	}
	return r.Deadline
}

// Request validation errors, wrapped by the error Validate returns.
var (
	ErrInvalidRequest    = errors.New("invalid rate-limit request")
	ErrDedupNotSupported = errors.New("evaluation id given but the policy has no dedup window")
	ErrDeadlineMissing   = errors.New("deadline is required")
	// ErrDeadlinePassed is not a validation error: a provider's precheck
	// wraps it in the cause of Unavailable{deadline}.
	ErrDeadlinePassed   = errors.New("deadline has passed")
	ErrCostOutOfRange   = errors.New("cost out of range")
	ErrCostAboveMaxCost = errors.New("cost above the policy's max cost")
	ErrPolicyMismatch   = errors.New("request policy id differs from the policy")
)

// Validate checks the bounds of every field of r that does not depend on
// the policy or the clock. It returns all violations joined, each wrapping
// ErrInvalidRequest and a specific sentinel. A deadline in the past is not a
// violation: whether time is left is the provider's precheck to decide. The
// error never contains the subject digest.
func (r Request) Validate() error {
	var errs []error
	if err := r.PolicyID.Validate(); err != nil {
		errs = append(errs, requestError("PolicyID", err))
	}
	if err := r.SubjectDigest.Validate(); err != nil {
		errs = append(errs, requestError("SubjectDigest", err))
	}
	if r.Cost < 1 || r.Cost > MaxExactInt {
		errs = append(errs, requestError("Cost", fmt.Errorf("%w: %d not in 1..%d", ErrCostOutOfRange, r.Cost, MaxExactInt)))
	}
	if r.EvaluationID != "" {
		if err := r.EvaluationID.Validate(); err != nil {
			errs = append(errs, requestError("EvaluationID", err))
		}
	}
	if r.Deadline.IsZero() {
		errs = append(errs, requestError("Deadline", ErrDeadlineMissing))
	}
	return errors.Join(errs...)
}

// ValidateFor checks r against p: p must be a policy built by NewPolicy, it
// must be the one r names, the cost must not exceed p.MaxCost() and an
// evaluation ID needs a dedup window (ErrDedupNotSupported). Call it after
// Validate. Errors wrap ErrInvalidRequest and a specific sentinel.
func (r Request) ValidateFor(p Policy) error {
	if p.IsZero() {
		return requestError("Policy", fmt.Errorf("%w: the zero Policy is not a policy", ErrPolicyMismatch))
	}
	var errs []error
	if r.PolicyID != p.ID() {
		errs = append(errs, requestError("PolicyID", fmt.Errorf("%w: %q vs %q", ErrPolicyMismatch, bounded(string(r.PolicyID)), p.ID())))
	}
	if r.Cost > p.MaxCost() {
		errs = append(errs, requestError("Cost", fmt.Errorf("%w: %d > %d", ErrCostAboveMaxCost, r.Cost, p.MaxCost())))
	}
	if r.EvaluationID != "" && p.DedupWindow() == 0 {
		errs = append(errs, requestError("EvaluationID", fmt.Errorf("%w: policy %q", ErrDedupNotSupported, p.ID())))
	}
	return errors.Join(errs...)
}

// LogValue implements slog.LogValuer: the request without its subject
// digest (only the digest's length), for every slog handler including JSON.
func (r Request) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("policy_id", string(r.PolicyID)),
		slog.Int("subject_digest_len", len(r.SubjectDigest)),
		slog.Int64("cost", r.Cost),
		slog.Bool("evaluation_id_set", r.EvaluationID != ""),
		slog.Time("deadline", r.Deadline),
	)
}

// RequestError names the request field at fault. Its text never contains the
// subject digest.
type RequestError struct {
	Field string
	Err   error
}

// Error renders "request <field>: <cause>".
func (e *RequestError) Error() string { return "request " + e.Field + ": " + e.Err.Error() }

// Unwrap exposes ErrInvalidRequest and the specific cause to errors.Is.
func (e *RequestError) Unwrap() []error { return []error{ErrInvalidRequest, e.Err} }

func requestError(field string, err error) error { return &RequestError{Field: field, Err: err} }
