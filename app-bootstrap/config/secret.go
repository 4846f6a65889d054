package config

import (
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/tech-log/tech-log-backend/shared-contract/keyspace"
)

// Redacted is what every textual form of a set Secret prints.
const Redacted = keyspace.Redacted

// MaxSecretFileLen bounds a secret file (every NAME_FILE variable, and
// tlbctl's password and API-key files): a secret is small, a large file is
// a mistake (a certificate bundle, a log) and is refused without being read
// further.
const MaxSecretFileLen = 64 << 10

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

// secret resolves NAME and NAME_FILE: at most one may be set; the file's
// content, less one trailing newline, is the value. It reports whether a
// value was set.
func (v *errs) secret(name string, direct Secret, file string) (Secret, bool) {
	fileVar := name + "_FILE"
	switch {
	case !direct.IsZero() && file != "":
		v.add(name, ErrConflict, "both %s and %s are set; set one", name, fileVar)
		return Secret{}, false
	case file != "":
		s, err := ReadSecretFile(file)
		if err != nil {
			v.add(fileVar, ErrInvalid, "%w", err)
			return Secret{}, false
		}
		return s, true
	default:
		return direct, !direct.IsZero()
	}
}

// keySecret resolves an HMAC secret (NAME or NAME_FILE), which is required
// and at least keyspace.MinSecretLen bytes.
func (v *errs) keySecret(name string, direct Secret, file string) keyspace.Secret {
	s, set := v.secret(name, direct, file)
	if !set {
		if direct.IsZero() && file == "" {
			v.add(name, ErrRequired, "an HMAC secret of at least %d bytes (or set %s_FILE)", keyspace.MinSecretLen, name)
		}
		return keyspace.Secret{}
	}
	ks, err := keyspace.NewSecret(s.v)
	if err != nil {
		v.add(name, ErrInvalid, "%w", err)
	}
	return ks
}

// ReadSecretFile reads the secret held in the file at path, by the rules of
// every NAME_FILE variable: at most MaxSecretFileLen bytes, one trailing
// newline ("\n" or "\r\n") dropped, and not empty after that. Errors name
// the path, never the content. It is the one reader of secret files: the
// service's configuration and tlbctl both use it.
func ReadSecretFile(path string) (Secret, error) {
	f, err := os.Open(path)
	if err != nil {
		return Secret{}, err
	}
	defer f.Close()
	return ReadSecret(f, path)
}

// ReadSecret is ReadSecretFile for an open reader (tlbctl reads standard
// input with it); name says where the secret comes from in errors.
func ReadSecret(r io.Reader, name string) (Secret, error) {
	b, err := io.ReadAll(io.LimitReader(r, MaxSecretFileLen+1))
	if err != nil {
		return Secret{}, fmt.Errorf("read %s: %w", name, err)
	}
	if len(b) > MaxSecretFileLen {
		return Secret{}, fmt.Errorf("%s is larger than %d bytes", name, MaxSecretFileLen)
	}
	if n := len(b); n > 0 && b[n-1] == '\n' {
		b = b[:n-1]
		if n := len(b); n > 0 && b[n-1] == '\r' {
			b = b[:n-1]
		}
	}
	if len(b) == 0 {
		return Secret{}, fmt.Errorf("%s is empty", name)
	}
	return Secret{v: b}, nil
}
