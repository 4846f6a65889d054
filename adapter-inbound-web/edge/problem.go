package edge

import (
	"errors"
	"net/http"

	"github.com/tech-log/tech-log-backend/adapter-inbound-web/internal/problem"
	"github.com/tech-log/tech-log-backend/adapter-inbound-web/subject"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// The problem bodies the edge writes (package problem owns the writer).
// None holds client data: the subject, raw or digest, and a cause's text
// never appear.

// writeTooMany is the 429 of a denied decision.
func writeTooMany(w http.ResponseWriter, policy ratelimit.PolicyID) {
	p := problem.New(http.StatusTooManyRequests, "too many requests")
	p.Policy = string(policy)
	problem.Write(w, p)
}

// writeUnavailable is the 503 of an outcome without a decision.
func writeUnavailable(w http.ResponseWriter, kind ratelimit.OutcomeKind, category ratelimit.Category, policy ratelimit.PolicyID) {
	p := problem.New(http.StatusServiceUnavailable, "rate limiter unavailable")
	p.Outcome, p.Category, p.Policy = string(kind), string(category), string(policy)
	problem.Write(w, p)
}

// writeIdentityError answers an Identifier's error as subject.ErrorStatus
// says, naming the policy, and returns the status.
func writeIdentityError(w http.ResponseWriter, policy ratelimit.PolicyID, err error) int {
	status, title := subject.ErrorStatus(err)
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", subject.Challenge)
	}
	p := problem.New(status, title)
	p.Policy = string(policy)
	problem.Write(w, p)
	return status
}

// writeBadIdempotencyKey is the 400 of a malformed Idempotency-Key: the
// port is not asked, nothing is charged. The detail is the fixed reason
// (never the key).
func writeBadIdempotencyKey(w http.ResponseWriter, policy ratelimit.PolicyID, err error) {
	p := problem.New(http.StatusBadRequest, "invalid Idempotency-Key")
	p.Policy = string(policy)
	for _, reason := range []error{errKeyRepeated, errKeyNotSFStr, errKeyBadToken, errKeyEmpty, errKeyTooLong} {
		if errors.Is(err, reason) {
			p.Detail = reason.Error()
		}
	}
	problem.Write(w, p)
}

// writeKeyReused is the 422 of an Idempotency-Key the client already used,
// within the dedup window, for a request of another cost or policy.
func writeKeyReused(w http.ResponseWriter, policy ratelimit.PolicyID) {
	p := problem.New(http.StatusUnprocessableEntity, "Idempotency-Key reused for another request")
	p.Outcome, p.Category, p.Policy = string(ratelimit.KindIncompatible), string(ratelimit.CategoryDedupConflict), string(policy)
	problem.Write(w, p)
}

// writeInternalError is the 500 when the digest cannot be derived.
func writeInternalError(w http.ResponseWriter, policy ratelimit.PolicyID) {
	p := problem.New(http.StatusInternalServerError, "internal server error")
	p.Policy = string(policy)
	problem.Write(w, p)
}

// sanitize keeps a category only if it looks like one ([a-z0-9_], at most
// 64 bytes): a broken port must not get arbitrary text into a response.
func sanitize(c ratelimit.Category) ratelimit.Category {
	if len(c) > 64 {
		return "unknown"
	}
	for i := 0; i < len(c); i++ {
		ch := c[i]
		if !(ch >= 'a' && ch <= 'z' || ch >= '0' && ch <= '9' || ch == '_') {
			return "unknown"
		}
	}
	return c
}
