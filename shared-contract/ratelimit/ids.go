package ratelimit

import (
	"errors"
	"fmt"
	"log/slog"
	"strconv"

	"github.com/tech-log/tech-log-backend/shared-contract/keyspace"
)

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
