package keyspace

import (
	"encoding/base64"
	"fmt"
	"strings"
	"sync"
)

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
