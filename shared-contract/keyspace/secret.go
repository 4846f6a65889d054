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

// Secret is HMAC key material. Its zero value is invalid (IsZero). It prints
// as Redacted under every fmt verb, GoString, slog and encoding/json, so it
// cannot leak into logs by accident. Copies share the same immutable bytes.
//
// The bytes sit behind a pointer to a pointer on purpose: fmt does not call
// methods on unexported fields, so a struct holding a Secret in an unexported
// field is printed by reflection, and fmt dereferences at most one pointer
// (to a struct, slice, array or map) before it prints an address. With two
// levels every verb, including a bad one, shows an address, never the bytes.
// A type that holds a Secret should still implement fmt.Formatter itself.
type Secret struct {
	ref *keyRef
}

// keyRef is the second pointer level (see Secret).
type keyRef *[]byte

// NewSecret copies b into a Secret; b must be at least MinSecretLen bytes.
// The error names the length, never the bytes.
func NewSecret(b []byte) (Secret, error) {
	if len(b) < MinSecretLen {
		return Secret{}, fmt.Errorf("%w: %d bytes, need at least %d", ErrSecretTooShort, len(b), MinSecretLen)
	}
	key := append([]byte(nil), b...)
	ref := keyRef(&key)
	return Secret{ref: &ref}, nil
}

// IsZero reports whether s was not built by NewSecret.
func (s Secret) IsZero() bool { return s.ref == nil }

// Len is the secret's length in bytes (0 for the zero Secret).
func (s Secret) Len() int {
	if s.ref == nil {
		return 0
	}
	return len(s.bytes())
}

// bytes returns the key material for HMAC. It is unexported so that only
// this package can read it; callers must not modify it.
func (s Secret) bytes() []byte { return **s.ref }

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
