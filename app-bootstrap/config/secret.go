package config

import (
	"fmt"
	"log/slog"

	"github.com/tech-log/tech-log-backend/shared-contract/keyspace"
)

// Redacted is what every textual form of a set Secret prints.
const Redacted = keyspace.Redacted

// maxSecretFileLen bounds a _FILE secret: a secret is small, a large file is
// a mistake (a certificate bundle, a log) and is refused before it is read.
const maxSecretFileLen = 64 << 10

// Secret is a configuration secret (a Redis password). The zero value is
// "not set". It prints as Redacted (or "" when unset) under every fmt verb,
// in slog and in JSON; only Reveal returns the value, for the client that
// needs it.
type Secret struct {
	v []byte
}

// NewSecret returns a Secret holding a copy of s.
func NewSecret(s string) Secret { return Secret{v: []byte(s)} }

// IsZero reports whether the secret is unset or empty.
func (s Secret) IsZero() bool { return len(s.v) == 0 }

// Len is the secret's length in bytes.
func (s Secret) Len() int { return len(s.v) }

// Reveal returns the secret's value. Call it only where the value is handed
// to the component that authenticates with it.
func (s Secret) Reveal() string { return string(s.v) }

// Bytes returns a copy of the secret's value, for HMAC keys.
func (s Secret) Bytes() []byte { return append([]byte(nil), s.v...) }

// UnmarshalText implements encoding.TextUnmarshaler, which env/v11 uses to
// fill the field from the environment.
func (s *Secret) UnmarshalText(b []byte) error {
	s.v = append([]byte(nil), b...)
	return nil
}

func (s Secret) redacted() string {
	if s.IsZero() {
		return ""
	}
	return Redacted
}

// String implements fmt.Stringer.
func (s Secret) String() string { return s.redacted() }

// GoString implements fmt.GoStringer.
func (s Secret) GoString() string { return "config.Secret(" + s.redacted() + ")" }

// Format implements fmt.Formatter so that no verb prints the value.
func (s Secret) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(s.redacted())) }

// LogValue implements slog.LogValuer.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.redacted()) }

// MarshalText implements encoding.TextMarshaler (used by encoding/json).
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.redacted()), nil }
