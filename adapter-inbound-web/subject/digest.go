package subject

import (
	"errors"
	"fmt"

	"github.com/tech-log/tech-log-backend/shared-contract/keyspace"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// DigestLen is the length of every SubjectDigest a Pseudonymizer returns.
const DigestLen = keyspace.DigestLen

// The MAC fields that separate subject digests from every other use of
// keyspace's derivation (capability, region, kind; then the identity).
const (
	macCapability = "subject"
	macRegion     = "web"
	macKindAPIKey = "api-key"
	macKindIP     = "ip"
	// macKindPrincipal separates principals from keys and addresses.
	macKindPrincipal = "principal"
	// macPrefix is the key prefix the Builder needs; it takes no part in
	// the digest.
	macPrefix = "tlb"
)

// ErrZeroIdentity is returned by Digest for an Identity not produced by a
// Resolver.
var ErrZeroIdentity = errors.New("identity is not set")

// Pseudonymizer derives SubjectDigests from Identities under the web subject
// secret. It is safe for concurrent use (the HMAC state is pooled) and prints
// without the secret.
type Pseudonymizer struct {
	b *keyspace.Builder
}

// NewPseudonymizer returns a Pseudonymizer under secret (from
// keyspace.NewSecret: at least keyspace.MinSecretLen bytes).
func NewPseudonymizer(secret keyspace.Secret) (*Pseudonymizer, error) {
	b, err := keyspace.NewBuilder(macPrefix, secret)
	if err != nil {
		return nil, fmt.Errorf("subject secret: %w", err)
	}
	return &Pseudonymizer{b: b}, nil
}

// Digest returns base64url(HMAC-SHA256(secret, Domain, "subject", "web",
// kind, identity)) with every field length-prefixed: DigestLen characters of
// [A-Za-z0-9_-]. An API key and an IP address with the same text yield
// different digests. The error never contains the identity.
func (p *Pseudonymizer) Digest(id Identity) (ratelimit.SubjectDigest, error) {
	var kind string
	switch id.kind {
	case KindAPIKey:
		kind = macKindAPIKey
	case KindIP:
		kind = macKindIP
	case KindPrincipal:
		kind = macKindPrincipal
	default:
		return "", ErrZeroIdentity
	}
	d, err := p.b.Digest(macCapability, macRegion, kind, id.value())
	if err != nil {
		return "", fmt.Errorf("subject digest (%s): %w", id.kind, err)
	}
	// keyspace.Builder.Digest always yields DigestLen base64url characters
	// (its tests assert it), so d is a valid SubjectDigest without a second
	// scan here; the port validates every Request anyway, failing closed.
	return ratelimit.SubjectDigest(d), nil
}

// String implements fmt.Stringer without the secret.
func (p *Pseudonymizer) String() string {
	return "subject.Pseudonymizer(secret=" + keyspace.Redacted + ")"
}

// GoString implements fmt.GoStringer without the secret.
func (p *Pseudonymizer) GoString() string { return p.String() }
