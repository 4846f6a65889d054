package keyspace

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"log/slog"
	"sync"
)

// Format and bounds of keys.
const (
	// Version is the derivation version embedded in every key.
	Version = "v1"
	// DefaultPrefix is the prefix used when none is configured.
	DefaultPrefix = "tlb"
	// MaxSegmentLen bounds prefix, capability, region and kind.
	MaxSegmentLen = 64
	// MaxFields bounds the number of digest fields.
	MaxFields = 16
	// MaxFieldLen bounds each digest field, in bytes.
	MaxFieldLen = 1024
	// DigestLen is the length of the base64url digest.
	DigestLen = 43
	// domain separates this derivation from any other use of the secret.
	domain = "tech-log-backend/keyspace/v1"
)

// Errors returned by NewBuilder and Key.
var (
	ErrInvalidSegment = errors.New("invalid key segment")
	ErrInvalidFields  = errors.New("invalid key fields")
	ErrZeroSecret     = errors.New("secret is not set")
)

// Builder derives physical keys. It is immutable and safe for concurrent use;
// the zero value is invalid. It prints its prefix only, never the secret.
type Builder struct {
	prefix string
	secret Secret
	pool   sync.Pool // of *macState
}

type macState struct {
	mac hash.Hash
	buf []byte
	sum [sha256.Size]byte
	out [DigestLen]byte
}

// NewBuilder returns a Builder for prefix (a segment: [a-z0-9][a-z0-9._-]*,
// at most MaxSegmentLen) under secret.
func NewBuilder(prefix string, secret Secret) (*Builder, error) {
	if err := checkSegment("prefix", prefix); err != nil {
		return nil, err
	}
	if secret.IsZero() {
		return nil, ErrZeroSecret
	}
	b := &Builder{prefix: prefix, secret: secret}
	b.pool.New = func() any {
		return &macState{mac: hmac.New(sha256.New, b.secret.bytes()), buf: make([]byte, 0, 256)}
	}
	return b, nil
}

// Prefix is the configured key prefix.
func (b *Builder) Prefix() string { return b.prefix }

// Key returns <prefix>:<capability>:<region>:<kind>:v1:<digest>, with the
// digest taken over capability, region, kind and fields, each length-prefixed
// so that ("ab","c") and ("a","bc") differ. Errors name the segment at fault
// and never contain a field's value.
func (b *Builder) Key(capability, region, kind string, fields ...string) (string, error) {
	if err := checkSegment("capability", capability); err != nil {
		return "", err
	}
	if err := checkSegment("region", region); err != nil {
		return "", err
	}
	if err := checkSegment("kind", kind); err != nil {
		return "", err
	}
	if len(fields) == 0 || len(fields) > MaxFields {
		return "", fmt.Errorf("%w: %d fields, want 1..%d", ErrInvalidFields, len(fields), MaxFields)
	}
	for i, f := range fields {
		if len(f) > MaxFieldLen {
			return "", fmt.Errorf("%w: field %d is %d bytes, max %d", ErrInvalidFields, i, len(f), MaxFieldLen)
		}
	}

	st := b.pool.Get().(*macState)
	defer b.pool.Put(st)
	buf := appendField(st.buf[:0], domain)
	buf = appendField(buf, capability)
	buf = appendField(buf, region)
	buf = appendField(buf, kind)
	for _, f := range fields {
		buf = appendField(buf, f)
	}
	st.buf = buf[:0]
	st.mac.Reset()
	st.mac.Write(buf)
	sum := st.mac.Sum(st.sum[:0])
	base64.RawURLEncoding.Encode(st.out[:], sum)

	n := len(b.prefix) + len(capability) + len(region) + len(kind) + len(Version) + DigestLen + 5
	key := make([]byte, 0, n)
	key = append(key, b.prefix...)
	key = append(key, ':')
	key = append(key, capability...)
	key = append(key, ':')
	key = append(key, region...)
	key = append(key, ':')
	key = append(key, kind...)
	key = append(key, ':')
	key = append(key, Version...)
	key = append(key, ':')
	key = append(key, st.out[:]...)
	return string(key), nil
}

// Pattern returns the SCAN/ACL pattern that matches every key of capability
// under this prefix, e.g. "tlb:rate:*".
func (b *Builder) Pattern(capability string) string { return b.prefix + ":" + capability + ":*" }

// String implements fmt.Stringer without the secret.
func (b *Builder) String() string {
	return "keyspace.Builder(prefix=" + b.prefix + ", secret=" + Redacted + ")"
}

// GoString implements fmt.GoStringer without the secret.
func (b *Builder) GoString() string { return b.String() }

// LogValue implements slog.LogValuer without the secret.
func (b *Builder) LogValue() slog.Value { return slog.StringValue(b.String()) }

func appendField(buf []byte, s string) []byte {
	buf = binary.AppendUvarint(buf, uint64(len(s)))
	return append(buf, s...)
}

// IsSegment reports whether s may be used as a key segment: 1..MaxSegmentLen
// bytes of [a-z0-9._-] starting with [a-z0-9].
func IsSegment(s string) bool {
	if len(s) == 0 || len(s) > MaxSegmentLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || i > 0 && (c == '.' || c == '_' || c == '-')) {
			return false
		}
	}
	return true
}

func checkSegment(name, s string) error {
	if !IsSegment(s) {
		return fmt.Errorf("%w: %s %q must be 1..%d bytes matching ^[a-z0-9][a-z0-9._-]*$", ErrInvalidSegment, name, bounded(s), MaxSegmentLen)
	}
	return nil
}

func bounded(s string) string {
	if len(s) > MaxSegmentLen {
		return s[:MaxSegmentLen] + "..."
	}
	return s
}
