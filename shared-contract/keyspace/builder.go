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

// Format of tagged keys (key version 2, docs/adr/0003-key-format-v2.md).
const (
	// TaggedVersion is the derivation version embedded in every tagged key.
	TaggedVersion = "v2"
	// TaggedDigestLen is the length of a tagged key's digest: unpadded
	// base64url of the first 128 bits of the MAC.
	TaggedDigestLen = 22
	// SlotTagLen is the length of a slot tag (the text between the braces).
	SlotTagLen = 3
	// ClusterSlots is the number of Redis Cluster hash slots.
	ClusterSlots = 16384
	// TaggedDomain is the first MAC field of a tagged key's digest.
	TaggedDomain = "tech-log-backend/keyspace/v2"
	// SlotDomain is the first MAC field of a slot tag's derivation.
	SlotDomain = "tech-log-backend/keyspace/v2/slot"
)

// TaggedKey returns
//
//	<prefix>:<capability>:<region>:<kind>:v2:{<tag>}<digest>
//
// where tag is SlotTag(tagField) and digest is the unpadded base64url of the
// first 16 bytes of HMAC-SHA256, under the secret, of TaggedDomain,
// capability, region, kind and fields, each prefixed with its length as an
// unsigned varint. Redis Cluster hashes only the text between the braces,
// so every key with the same tagField lands in the same slot, whatever its
// capability, region, kind and fields. tagField must be a pseudonym (for
// example a subject digest), never raw identity; it is not part of the
// digest unless the caller also passes it among fields. Arguments are
// validated as Key does, tagField like a field; errors never contain a
// field's value.
func (b *Builder) TaggedKey(capability, region, kind, tagField string, fields ...string) (string, error) {
	if len(tagField) > MaxFieldLen {
		return "", fmt.Errorf("%w: tag field is %d bytes, max %d", ErrInvalidFields, len(tagField), MaxFieldLen)
	}
	st, err := b.digestIn(TaggedDomain, capability, region, kind, fields)
	if err != nil {
		return "", err
	}
	var digest [TaggedDigestLen]byte
	base64.RawURLEncoding.Encode(digest[:], st.sum[:16])
	tag := b.slotTagWith(st, tagField)
	b.pool.Put(st)

	var key strings.Builder
	b.head(&key, capability, region, kind, TaggedVersion, SlotTagLen+TaggedDigestLen+3)
	key.WriteString(":{")
	key.WriteString(tag)
	key.WriteByte('}')
	key.Write(digest[:])
	return key.String(), nil
}

// SlotTag returns the slot tag of tagField: the first 14 bits of
// HMAC-SHA256, under the secret, of SlotDomain and tagField (each
// length-prefixed) select a slot s uniformly in 0..16383, and the tag is
// SlotTagFor(s), the canonical 3-character string Redis Cluster hashes to
// s. The tag therefore says which slot the key is in and nothing more.
func (b *Builder) SlotTag(tagField string) (string, error) {
	if b == nil || b.secret.IsZero() {
		return "", fmt.Errorf("slot tag: %w", ErrZeroSecret)
	}
	if len(tagField) > MaxFieldLen {
		return "", fmt.Errorf("%w: tag field is %d bytes, max %d", ErrInvalidFields, len(tagField), MaxFieldLen)
	}
	st := b.pool.Get().(*macState)
	defer b.pool.Put(st)
	return b.slotTagWith(st, tagField), nil
}

// slotTagWith computes SlotTag(tagField) with st's MAC.
func (b *Builder) slotTagWith(st *macState, tagField string) string {
	buf := appendField(st.buf[:0], SlotDomain)
	buf = appendField(buf, tagField)
	st.buf = buf[:0]
	st.mac.Reset()
	st.mac.Write(buf)
	sum := st.mac.Sum(st.sum[:0])
	slot := (int(sum[0])<<8 | int(sum[1])) & (ClusterSlots - 1)
	return SlotTagFor(slot)
}

// tagAlphabet is the unpadded base64url alphabet, in the order slot tags
// are searched.
const tagAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

var (
	slotTagsOnce sync.Once
	slotTags     *[ClusterSlots][SlotTagLen]byte
)

// SlotTagFor returns the canonical tag of slot (0..16383): the first
// 3-character string over the base64url alphabet, in alphabet order
// (first character most significant), whose CRC16 modulo 16384 is slot.
// Every slot has one (each has 8 to 23 such strings). It panics when slot
// is out of range.
func SlotTagFor(slot int) string {
	if slot < 0 || slot >= ClusterSlots {
		panic(fmt.Sprintf("keyspace: slot %d outside 0..%d", slot, ClusterSlots-1))
	}
	slotTagsOnce.Do(buildSlotTags)
	t := slotTags[slot]
	return string(t[:])
}

func buildSlotTags() {
	var tags [ClusterSlots][SlotTagLen]byte
	var found [ClusterSlots]bool
	n := 0
	for i := 0; i < 64*64*64 && n < ClusterSlots; i++ {
		t := [SlotTagLen]byte{tagAlphabet[i>>12], tagAlphabet[i>>6&63], tagAlphabet[i&63]}
		s := int(crc16(t[:]) & (ClusterSlots - 1))
		if !found[s] {
			found[s], tags[s] = true, t
			n++
		}
	}
	if n != ClusterSlots {
		panic("keyspace: a slot has no 3-character tag") // impossible: checked by tests
	}
	slotTags = &tags
}

// Slot returns the Redis Cluster hash slot of key: CRC-16/XMODEM of its
// hash tag (the text between the first '{' and the next '}', when not
// empty) or of the whole key, modulo ClusterSlots. It is the one slot
// function: the cluster routing of redisrate and redistest use it.
func Slot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return int(crc16(key) % ClusterSlots)
}

// crc16 is CRC-16/XMODEM (polynomial 0x1021, initial 0), Redis Cluster's
// key hash.
func crc16[T string | []byte](b T) uint16 {
	var crc uint16
	for i := 0; i < len(b); i++ {
		crc ^= uint16(b[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

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
