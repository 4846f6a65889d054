package subject

import (
	"errors"
	"fmt"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// macKindIdempotency separates evaluation IDs from subject digests.
const macKindIdempotency = "idempotency-key"

// ErrNoIdempotencyKey is returned by EvaluationID for an empty key.
var ErrNoIdempotencyKey = errors.New("idempotency key is empty")

// EvaluationID returns the evaluation ID of a client's idempotency key:
// base64url(HMAC-SHA256(secret, Domain, "subject", "web", "idempotency-key",
// subject, key)) with every field length-prefixed, DigestLen characters. The
// subject digest is part of the MAC input, so two clients sending the same
// key get unrelated IDs and one cannot reach another's dedup records; the
// key itself never reaches the port, Redis, a log or an error.
func (p *Pseudonymizer) EvaluationID(subject ratelimit.SubjectDigest, key string) (ratelimit.EvaluationID, error) {
	if key == "" {
		return "", ErrNoIdempotencyKey
	}
	if err := subject.Validate(); err != nil {
		return "", fmt.Errorf("evaluation id: %w", err)
	}
	d, err := p.b.Digest(macCapability, macRegion, macKindIdempotency, string(subject), key)
	if err != nil {
		// The builder's errors name its segments, never the field values.
		return "", fmt.Errorf("evaluation id: %w", err)
	}
	return ratelimit.EvaluationID(d), nil
}
