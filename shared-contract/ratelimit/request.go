package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/tech-log/tech-log-backend/shared-contract/keyspace"
)

// Request asks for Cost units of the policy PolicyID on behalf of
// SubjectDigest. The zero value is invalid. Printing a Request (fmt, slog)
// never shows the subject digest, only its length.
type Request struct {
	// PolicyID selects the policy; see PolicyID for the syntax.
	PolicyID PolicyID
	// SubjectDigest is the pseudonymized subject; see SubjectDigest.
	SubjectDigest SubjectDigest
	// Cost is the number of units to take, 1..policy.MaxCost(); with
	// Lease, 1..policy.LeaseMaxCost().
	Cost int64
	// Lease marks a lease's reservation (ADR 0042): an instance takes
	// Cost units at once to admit from locally. Only a lease decorator
	// sets it; an inbound adapter never does.
	Lease bool
	// Replaces, with Lease, is the receipt of the same instance's previous
	// lease of the subject, which has ended or is spent: an algorithm that
	// records leases (AlgorithmSpec.LeaseRecords) drops its record in the
	// same call, so that a spent lease stops holding the bucket below its
	// capacity (ADR 0042). The zero Receipt replaces nothing.
	Replaces Receipt
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

// MaxEvaluationTimeout is the longest evaluation timeout an inbound adapter
// may give a request (the edge's Config.Timeout, the configuration's
// APP_WEB_EVALUATION_TIMEOUT): its Deadline is at most that far from now.
const MaxEvaluationTimeout = time.Minute

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
	errs = validateShared(errs, r.SubjectDigest, r.Cost, r.Deadline)
	if r.EvaluationID != "" {
		if err := r.EvaluationID.Validate(); err != nil {
			errs = append(errs, requestError("EvaluationID", err))
		}
	}
	return errors.Join(errs...)
}

// validateShared appends the errors of a Request's subject digest, cost
// bounds and deadline.
func validateShared(errs []error, d SubjectDigest, cost int64, deadline time.Time) []error {
	if err := d.Validate(); err != nil {
		errs = append(errs, requestError("SubjectDigest", err))
	}
	if cost < 1 || cost > MaxExactInt {
		errs = append(errs, requestError("Cost", fmt.Errorf("%w: %d not in 1..%d", ErrCostOutOfRange, cost, MaxExactInt)))
	}
	if deadline.IsZero() {
		errs = append(errs, requestError("Deadline", ErrDeadlineMissing))
	}
	return errs
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
	if maxCost := p.requestMaxCost(r.Lease); r.Cost > maxCost {
		errs = append(errs, requestError("Cost", fmt.Errorf("%w: %d > %d", ErrCostAboveMaxCost, r.Cost, maxCost)))
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

// PolicyID names a policy. It is 1 to 64 characters, starts with a lowercase
// letter or digit and continues with lowercase letters, digits, '.', '_' or
// '-'. It is safe to use in a Redis key region and as a metric label.
type PolicyID string

// MaxPolicyIDLen is the longest accepted PolicyID (a key segment).
const MaxPolicyIDLen = keyspace.MaxSegmentLen

// SubjectDigest is an already pseudonymized subject (for example an HMAC of an
// API key or client IP). It is 16 to 128 characters of the base64url alphabet
// [A-Za-z0-9_-]; a provider never sees the raw identity.
//
// Even pseudonymized, a subject stays out of logs: every fmt verb, GoString
// and slog print only its length (see String). Use string(d) where the value
// itself is needed, i.e. as a key-digest field.
type SubjectDigest string

// String returns "[subject digest, N bytes]", never the digest.
func (d SubjectDigest) String() string {
	return "[subject digest, " + strconv.Itoa(len(d)) + " bytes]"
}

// GoString implements fmt.GoStringer without the digest.
func (d SubjectDigest) GoString() string { return d.String() }

// Format implements fmt.Formatter so that no verb (%s, %q, %x, %v...) prints
// the digest.
func (d SubjectDigest) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(d.String())) }

// LogValue implements slog.LogValuer without the digest.
func (d SubjectDigest) LogValue() slog.Value { return slog.StringValue(d.String()) }

// Subject digest length bounds.
const (
	MinSubjectDigestLen = 16
	MaxSubjectDigestLen = 128
)

// EvaluationID names one evaluation for deduplication (Request.EvaluationID):
// 1 to MaxEvaluationIDLen characters of [A-Za-z0-9._-]. The HTTP edge derives
// it from the Idempotency-Key header as an HMAC keyed by the subject, so it
// is as private as a subject digest: every fmt verb, GoString and slog print
// only its length.
type EvaluationID string

// MaxEvaluationIDLen is the longest accepted EvaluationID: it is stored,
// once per admitted evaluation, in the subject's dedup record.
const MaxEvaluationIDLen = 64

// String returns "[evaluation id, N bytes]", never the ID.
func (e EvaluationID) String() string {
	return "[evaluation id, " + strconv.Itoa(len(e)) + " bytes]"
}

// GoString implements fmt.GoStringer without the ID.
func (e EvaluationID) GoString() string { return e.String() }

// Format implements fmt.Formatter so that no verb prints the ID.
func (e EvaluationID) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(e.String())) }

// LogValue implements slog.LogValuer without the ID.
func (e EvaluationID) LogValue() slog.Value { return slog.StringValue(e.String()) }

// ErrInvalidEvaluationID is wrapped by EvaluationID.Validate's errors.
var ErrInvalidEvaluationID = errors.New("invalid evaluation id")

// Validate reports whether e has the EvaluationID syntax; the empty ID (no
// dedup requested) is invalid here, Request.Validate skips it. The error
// names the length or the position at fault, never the ID.
func (e EvaluationID) Validate() error {
	n := len(e)
	if n < 1 || n > MaxEvaluationIDLen {
		return fmt.Errorf("%w: length %d outside 1..%d", ErrInvalidEvaluationID, n, MaxEvaluationIDLen)
	}
	for i := 0; i < n; i++ {
		if c := e[i]; !isBase64URL(c) && c != '.' {
			return fmt.Errorf("%w: byte %d is not in [A-Za-z0-9._-]", ErrInvalidEvaluationID, i)
		}
	}
	return nil
}

// ErrInvalidPolicyID and ErrInvalidSubjectDigest are wrapped by the errors
// Validate returns for malformed identifiers.
var (
	ErrInvalidPolicyID      = errors.New("invalid policy id")
	ErrInvalidSubjectDigest = errors.New("invalid subject digest")
)

// Validate reports whether id has the PolicyID syntax.
func (id PolicyID) Validate() error {
	if !keyspace.IsSegment(string(id)) {
		return fmt.Errorf("%w: %q must match ^[a-z0-9][a-z0-9._-]{0,63}$", ErrInvalidPolicyID, bounded(string(id)))
	}
	return nil
}

// ParsePolicyID validates s and returns it as a PolicyID.
func ParsePolicyID(s string) (PolicyID, error) {
	id := PolicyID(s)
	return id, id.Validate()
}

// Validate reports whether d has the SubjectDigest syntax. The error never
// contains the digest itself: even pseudonymized subjects stay out of logs.
func (d SubjectDigest) Validate() error {
	n := len(d)
	if n < MinSubjectDigestLen || n > MaxSubjectDigestLen {
		return fmt.Errorf("%w: length %d outside %d..%d", ErrInvalidSubjectDigest, n, MinSubjectDigestLen, MaxSubjectDigestLen)
	}
	for i := 0; i < n; i++ {
		if !isBase64URL(d[i]) {
			return fmt.Errorf("%w: byte %d is not in [A-Za-z0-9_-]", ErrInvalidSubjectDigest, i)
		}
	}
	return nil
}

func isBase64URL(c byte) bool { return base64URL[c] }

// base64URL marks the bytes of the base64url alphabet: a table lookup per
// byte, because a digest's bytes are random and a chain of range tests
// mispredicts on them (SubjectDigest.Validate runs on every request).
var base64URL = func() (t [256]bool) {
	for c := range 256 {
		b := byte(c)
		t[c] = b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '-' || b == '_'
	}
	return t
}()

// bounded trims s for inclusion in an error message.
func bounded(s string) string {
	const max = 80
	if len(s) > max {
		return s[:max] + "..."
	}
	return s
}
