package keyspace

import (
	"errors"
	"fmt"
	"log/slog"
)

// MinSecretLen is the shortest accepted HMAC secret, in bytes.
const MinSecretLen = 32

// ErrSecretTooShort is returned by NewSecret for secrets under MinSecretLen.
var ErrSecretTooShort = errors.New("secret too short")

// Redacted is what every textual form of a Secret prints.
const Redacted = "[redacted]"

// Secret is HMAC key material. Its zero value is invalid. It prints as
// Redacted under every fmt verb, in slog and in JSON, so it cannot leak into
// logs by accident.
type Secret struct {
	b []byte
}

// NewSecret copies b into a Secret; b must be at least MinSecretLen bytes.
// The error names the length, never the bytes.
func NewSecret(b []byte) (Secret, error) {
	if len(b) < MinSecretLen {
		return Secret{}, fmt.Errorf("%w: %d bytes, need at least %d", ErrSecretTooShort, len(b), MinSecretLen)
	}
	return Secret{b: append([]byte(nil), b...)}, nil
}

// IsZero reports whether s was not built by NewSecret.
func (s Secret) IsZero() bool { return len(s.b) == 0 }

// Len is the secret's length in bytes.
func (s Secret) Len() int { return len(s.b) }

// bytes returns the key material for HMAC. It is unexported so that only
// this package can read it.
func (s Secret) bytes() []byte { return s.b }

// String implements fmt.Stringer.
func (Secret) String() string { return Redacted }

// GoString implements fmt.GoStringer.
func (Secret) GoString() string { return "keyspace.Secret(" + Redacted + ")" }

// Format implements fmt.Formatter so that no verb (%x, %d, %#v...) prints the
// bytes.
func (Secret) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(Redacted)) }

// LogValue implements slog.LogValuer.
func (Secret) LogValue() slog.Value { return slog.StringValue(Redacted) }

// MarshalText implements encoding.TextMarshaler (used by encoding/json).
func (Secret) MarshalText() ([]byte, error) { return []byte(Redacted), nil }
