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
	"strings"
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
	// Domain is the first MAC field of every key: it separates this
	// derivation from any other use of the secret.
	Domain = "tech-log-backend/keyspace/v1"
)

// Errors returned by NewBuilder and Key.
var (
	ErrInvalidSegment = errors.New("invalid key segment")
	ErrInvalidFields  = errors.New("invalid key fields")
	ErrZeroSecret     = errors.New("secret is not set")
)

// Builder derives physical keys. It is immutable and safe for concurrent use;
// the zero value is invalid (Key returns ErrZeroSecret). Under every fmt verb,
// slog and encoding/json it shows its prefix only, never the secret. Use it by
// pointer: it must not be copied after first use.
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
// at most MaxSegmentLen) under secret, which must come from NewSecret.
func NewBuilder(prefix string, secret Secret) (*Builder, error) {
	if err := checkSegment("prefix", prefix); err != nil {
		return nil, err
	}
	if secret.IsZero() {
		return nil, fmt.Errorf("new builder: %w", ErrZeroSecret)
	}
	b := &Builder{prefix: prefix, secret: secret}
	b.pool.New = func() any {
		return &macState{mac: hmac.New(sha256.New, b.secret.bytes()), buf: make([]byte, 0, 256)}
	}
	return b, nil
}

// Prefix is the configured key prefix.
func (b *Builder) Prefix() string { return b.prefix }

// Key returns <prefix>:<capability>:<region>:<kind>:v1:<digest>, where
// digest is what Digest returns for the same arguments. Errors name the
// argument at fault and never contain a field's value.
func (b *Builder) Key(capability, region, kind string, fields ...string) (string, error) {
	st, err := b.digest(capability, region, kind, fields)
	if err != nil {
		return "", err
	}
	defer b.pool.Put(st)
	var key strings.Builder
	b.head(&key, capability, region, kind, Version, DigestLen+1)
	key.WriteByte(':')
	key.Write(st.out[:])
	return key.String(), nil
}

// head writes <prefix>:<capability>:<region>:<kind>:<version> into key,
// growing it first for tail more bytes.
func (b *Builder) head(key *strings.Builder, capability, region, kind, version string, tail int) {
	key.Grow(len(b.prefix) + len(capability) + len(region) + len(kind) + len(version) + 4 + tail)
	key.WriteString(b.prefix)
	key.WriteByte(':')
	key.WriteString(capability)
	key.WriteByte(':')
	key.WriteString(region)
	key.WriteByte(':')
	key.WriteString(kind)
	key.WriteByte(':')
	key.WriteString(version)
}

// Digest returns the last segment of Key alone: the unpadded base64url
// HMAC-SHA256, under the secret, of Domain, capability, region, kind and
// fields, each prefixed with its length as an unsigned varint so that
// ("ab","c") and ("a","bc") differ. It is always DigestLen characters of
// [A-Za-z0-9_-]. Fields are 1 to MaxFields strings of at most MaxFieldLen
// bytes (an empty field is allowed). The prefix takes no part in it. Errors
// name the argument at fault and never contain a field's value.
func (b *Builder) Digest(capability, region, kind string, fields ...string) (string, error) {
	st, err := b.digest(capability, region, kind, fields)
	if err != nil {
		return "", err
	}
	d := string(st.out[:])
	b.pool.Put(st)
	return d, nil
}

// digest validates the arguments and leaves the digest in the returned
// state's out; the caller puts the state back into the pool.
func (b *Builder) digest(capability, region, kind string, fields []string) (*macState, error) {
	return b.digestIn(Domain, capability, region, kind, fields)
}

// digestIn is digest under domain; out holds the full 43-character
// encoding of the MAC.
func (b *Builder) digestIn(domain, capability, region, kind string, fields []string) (*macState, error) {
	if b == nil || b.secret.IsZero() {
		return nil, fmt.Errorf("key: %w", ErrZeroSecret)
	}
	if err := checkSegment("capability", capability); err != nil {
		return nil, err
	}
	if err := checkSegment("region", region); err != nil {
		return nil, err
	}
	if err := checkSegment("kind", kind); err != nil {
		return nil, err
	}
	if len(fields) == 0 || len(fields) > MaxFields {
		return nil, fmt.Errorf("%w: %d fields, want 1..%d", ErrInvalidFields, len(fields), MaxFields)
	}
	for i, f := range fields {
		if len(f) > MaxFieldLen {
			return nil, fmt.Errorf("%w: field %d is %d bytes, max %d", ErrInvalidFields, i, len(f), MaxFieldLen)
		}
	}

	st := b.pool.Get().(*macState)
	buf := appendField(st.buf[:0], domain)
	buf = appendField(buf, capability)
	buf = appendField(buf, region)
	buf = appendField(buf, kind)
	for _, f := range fields {
		buf = appendField(buf, f)
	}
	st.buf = buf[:0] // keep the grown buffer for the next call
	st.mac.Reset()
	st.mac.Write(buf)
	sum := st.mac.Sum(st.sum[:0])
	base64.RawURLEncoding.Encode(st.out[:], sum)
	return st, nil
}

// Pattern returns the SCAN/ACL pattern that matches every key of capability
// under this prefix, e.g. "tlb:rate:*". It is "" when capability is not a
// segment, so a malformed capability never widens the pattern.
func (b *Builder) Pattern(capability string) string {
	if !IsSegment(capability) {
		return ""
	}
	return b.prefix + ":" + capability + ":*"
}

// String implements fmt.Stringer without the secret.
func (b *Builder) String() string {
	if b == nil {
		return "keyspace.Builder(nil)"
	}
	return "keyspace.Builder(prefix=" + b.prefix + ", secret=" + Redacted + ")"
}

// GoString implements fmt.GoStringer without the secret.
func (b *Builder) GoString() string { return b.String() }

// Format implements fmt.Formatter so that no verb (%d, %x, %+v...) reaches the
// fields by reflection.
func (b *Builder) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(b.String())) }

// LogValue implements slog.LogValuer without the secret.
func (b *Builder) LogValue() slog.Value { return slog.StringValue(b.String()) }

// MarshalText implements encoding.TextMarshaler (used by encoding/json)
// without the secret.
func (b *Builder) MarshalText() ([]byte, error) { return []byte(b.String()), nil }

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
		if !segmentByte(i, s[i]) {
			return false
		}
	}
	return true
}

// segmentByte reports whether c may stand at position i of a segment.
func segmentByte(i int, c byte) bool {
	return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || i > 0 && (c == '.' || c == '_' || c == '-')
}

// checkSegment names the argument, its length and the first bad byte, but not
// the value: a caller that mistakenly passes a subject as a segment must not
// see it in a log line.
func checkSegment(name, s string) error {
	if IsSegment(s) {
		return nil
	}
	if len(s) == 0 || len(s) > MaxSegmentLen {
		return fmt.Errorf("%w: %s is %d bytes, want 1..%d", ErrInvalidSegment, name, len(s), MaxSegmentLen)
	}
	i := 0
	for segmentByte(i, s[i]) {
		i++
	}
	return fmt.Errorf("%w: %s byte %d is not allowed: want ^[a-z0-9][a-z0-9._-]*$", ErrInvalidSegment, name, i)
}
