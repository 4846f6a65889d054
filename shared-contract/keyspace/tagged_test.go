package keyspace_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/shared-contract/keyspace"
)

const taggedGoldenPath = "testdata/keys-v2.json"

type taggedVector struct {
	Name       string   `json:"name"`
	SecretHex  string   `json:"secretHex"`
	Prefix     string   `json:"prefix"`
	Capability string   `json:"capability"`
	Region     string   `json:"region"`
	Kind       string   `json:"kind"`
	TagField   string   `json:"tagField"`
	Fields     []string `json:"fields"`
	Slot       int      `json:"slot"`
	Key        string   `json:"key"`
}

type taggedGoldenFile struct {
	Format  string         `json:"format"`
	Note    string         `json:"note"`
	Vectors []taggedVector `json:"vectors"`
}

// taggedInputs reuses the v1 inputs, tagged by their last field (the
// subject digest in rate-state vectors), plus vectors that share a tag.
// The v1 kind "state" is the v2 rate-state kind "s" (ADR 0003, ADR 0010).
func taggedInputs() []taggedVector {
	var out []taggedVector
	for _, v := range goldenInputs() {
		kind := v.Kind
		if kind == "state" {
			kind = "s"
		}
		out = append(out, taggedVector{Name: v.Name, SecretHex: v.SecretHex, Prefix: v.Prefix, Capability: v.Capability,
			Region: v.Region, Kind: kind, TagField: v.Fields[len(v.Fields)-1], Fields: v.Fields})
	}
	return append(out,
		taggedVector{Name: "same subject, other policy (same slot)", SecretHex: secretA, Prefix: "tlb", Capability: "rate", Region: "login", Kind: "s", TagField: digest43, Fields: []string{"login", "1", "token_bucket", digest43}},
		taggedVector{Name: "same subject, dedup kind (same slot)", SecretHex: secretA, Prefix: "tlb", Capability: "rate", Region: "api", Kind: "dedup", TagField: digest43, Fields: []string{"api", "evaluation-7"}},
		taggedVector{Name: "other subject", SecretHex: secretA, Prefix: "tlb", Capability: "rate", Region: "api", Kind: "s", TagField: "z" + digest43[1:], Fields: []string{"api", "1", "token_bucket", "z" + digest43[1:]}},
		taggedVector{Name: "empty tag field", SecretHex: secretA, Prefix: "tlb", Capability: "rate", Region: "api", Kind: "s", TagField: "", Fields: []string{"x"}},
	)
}

// crcTable is CRC-16/XMODEM's byte table, built independently of the
// package's bitwise loop.
var crcTable = func() (table [256]uint16) {
	for i := range table {
		c := uint16(i) << 8
		for range 8 {
			if c&0x8000 != 0 {
				c = c<<1 ^ 0x1021
			} else {
				c <<= 1
			}
		}
		table[i] = c
	}
	return table
}()

// refCRC16 is CRC-16/XMODEM, table-driven.
func refCRC16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc = crc<<8 ^ crcTable[byte(crc>>8)^s[i]]
	}
	return crc
}

// refSlot is the Redis Cluster key slot (hash tag rule of the cluster spec).
func refSlot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return int(refCRC16(key) % keyspace.ClusterSlots)
}

func refMAC(secret []byte, fields ...string) []byte {
	var msg []byte
	for _, f := range fields {
		msg = binary.AppendUvarint(msg, uint64(len(f)))
		msg = append(msg, f...)
	}
	m := hmac.New(sha256.New, secret)
	m.Write(msg)
	return m.Sum(nil)
}

// refTaggedKey is ADR 0003's derivation written out independently.
func refTaggedKey(secret []byte, v taggedVector) (key string, slot int) {
	sum := refMAC(secret, "tech-log-backend/keyspace/v2/slot", v.TagField)
	slot = int(binary.BigEndian.Uint16(sum)) % 16384
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	tag := ""
	for _, a := range alphabet {
		for _, b := range alphabet {
			for _, c := range alphabet {
				if t := string([]rune{a, b, c}); tag == "" && refCRC16(t)%16384 == uint16(slot) {
					tag = t
				}
			}
		}
	}
	digest := base64.RawURLEncoding.EncodeToString(refMAC(secret, append([]string{"tech-log-backend/keyspace/v2", v.Capability, v.Region, v.Kind}, v.Fields...)...)[:16])
	return strings.Join([]string{v.Prefix, v.Capability, v.Region, v.Kind, "v2", "{" + tag + "}" + digest}, ":"), slot
}

func taggedKeyOf(t testing.TB, v taggedVector) string {
	t.Helper()
	k, err := builderFor(t, v.SecretHex, v.Prefix).TaggedKey(v.Capability, v.Region, v.Kind, v.TagField, v.Fields...)
	require.NoError(t, err, v.Name)
	return k
}

// TestTaggedGoldenVectors pins the v2 derivation (testdata/keys-v2.json):
// Builder and the independent reference reproduce every key, and the slot
// recorded in the file is the key's cluster slot. `go test ./keyspace
// -update` rewrites the file after inputs are added; a changed key for an
// existing vector is a derivation change and needs a new version.
func TestTaggedGoldenVectors(t *testing.T) {
	inputs := taggedInputs()
	if *update {
		for i := range inputs {
			inputs[i].Key = taggedKeyOf(t, inputs[i])
			inputs[i].Slot = refSlot(inputs[i].Key)
		}
		var out bytes.Buffer
		enc := json.NewEncoder(&out)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		require.NoError(t, enc.Encode(taggedGoldenFile{
			Format:  "keyspace-vectors/v2",
			Note:    "Generated by `go test ./keyspace -update`. key = <prefix>:<capability>:<region>:<kind>:v2:{<tag>}<digest>; digest = base64url(first 16 bytes of HMAC-SHA256(secret, uvarint-length-prefixed tech-log-backend/keyspace/v2, capability, region, kind, fields...)); slot = first 2 bytes (big endian) of HMAC-SHA256(secret, tech-log-backend/keyspace/v2/slot, tagField) mod 16384; tag = first 3-character base64url string (alphabet order) whose CRC16 mod 16384 is slot. See docs/adr/0003-key-format-v2.md.",
			Vectors: inputs,
		}))
		require.NoError(t, os.WriteFile(taggedGoldenPath, out.Bytes(), 0o644))
	}
	raw, err := os.ReadFile(taggedGoldenPath)
	require.NoError(t, err, "run `go test ./keyspace -update` to create it")
	var golden taggedGoldenFile
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&golden))
	require.Equal(t, "keyspace-vectors/v2", golden.Format)
	require.Len(t, golden.Vectors, len(inputs), "the file and taggedInputs disagree: run -update after adding inputs")

	slotOf := map[string]int{}
	for i, v := range golden.Vectors {
		t.Run(v.Name, func(t *testing.T) {
			in := inputs[i]
			in.Key, in.Slot = v.Key, v.Slot
			require.Equal(t, in, v, "vector inputs changed")
			assert.Equal(t, v.Key, taggedKeyOf(t, v), "Builder no longer reproduces the golden key")
			secret, err := hex.DecodeString(v.SecretHex)
			require.NoError(t, err)
			ref, slot := refTaggedKey(secret, v)
			assert.Equal(t, v.Key, ref, "the reference derivation disagrees")
			assert.Equal(t, v.Slot, slot)
			assert.Equal(t, v.Slot, refSlot(v.Key), "the key hashes to the derived slot")
			assertTaggedFormat(t, v.Key, v.Prefix, v.Capability, v.Region, v.Kind)
			tag, err := builderFor(t, v.SecretHex, v.Prefix).SlotTag(v.TagField)
			require.NoError(t, err)
			assert.Contains(t, v.Key, ":{"+tag+"}")
			if s, ok := slotOf[v.SecretHex+"\x00"+v.TagField]; ok {
				assert.Equal(t, s, v.Slot, "one tag field, one slot")
			}
			slotOf[v.SecretHex+"\x00"+v.TagField] = v.Slot
		})
	}
}

func assertTaggedFormat(t testing.TB, key, prefix, capability, region, kind string) {
	t.Helper()
	parts := strings.Split(key, ":")
	require.Len(t, parts, 6, key)
	assert.Equal(t, []string{prefix, capability, region, kind, keyspace.TaggedVersion}, parts[:5])
	assert.Regexp(t, `^\{[A-Za-z0-9_-]{3}\}[A-Za-z0-9_-]{22}$`, parts[5])
	assert.Equal(t, len(prefix)+len(capability)+len(region)+len(kind)+len(keyspace.TaggedVersion)+keyspace.SlotTagLen+keyspace.TaggedDigestLen+7, len(key))
}

// TestSlotTagFor: every slot has a canonical tag that hashes to it, found
// by the reference search, and no two slots share a tag.
func TestSlotTagFor(t *testing.T) {
	assert.Equal(t, uint16(0x31C3), refCRC16("123456789"), "CRC-16/XMODEM check value")
	seen := map[string]bool{}
	for slot := range keyspace.ClusterSlots {
		tag := keyspace.SlotTagFor(slot)
		require.Len(t, tag, keyspace.SlotTagLen)
		require.Equal(t, slot, refSlot("{"+tag+"}"), "tag %q", tag)
		require.False(t, seen[tag])
		seen[tag] = true
	}
	assert.Panics(t, func() { keyspace.SlotTagFor(-1) })
	assert.Panics(t, func() { keyspace.SlotTagFor(keyspace.ClusterSlots) })
}

// TestTaggedSpread: 2^17 subjects spread over the slots and over three
// equal slot ranges (the primaries of a 3-primary cluster) evenly. The
// inputs are fixed, so the counts are deterministic; the bounds are the
// binomial ±4σ around the mean.
func TestTaggedSpread(t *testing.T) {
	b := newBuilder(t)
	const n = 1 << 17
	var perSlot [keyspace.ClusterSlots]int
	var perThird [3]int
	for i := range n {
		key, err := b.TaggedKey("rate", "api", "state", fmt.Sprintf("subject-%d", i), "api", "1", "token_bucket", fmt.Sprintf("subject-%d", i))
		require.NoError(t, err)
		s := refSlot(key)
		perSlot[s]++
		perThird[s*3/keyspace.ClusterSlots]++
	}
	for i, c := range perThird {
		assert.InDelta(t, n/3, c, 4*170, "third %d", i) // σ = sqrt(n·1/3·2/3) ≈ 171
	}
	empty, most := 0, 0
	for _, c := range perSlot {
		if c == 0 {
			empty++
		}
		most = max(most, c)
	}
	// Mean 8 per slot: P(0) = e^-8 ≈ 0.03%, so about 5 empty slots.
	assert.Less(t, empty, 30)
	assert.Less(t, most, 30)
}

// TestTaggedKeyErrors: the arguments are validated as Key's, the tag field
// like a field, and no error contains a value.
func TestTaggedKeyErrors(t *testing.T) {
	b := newBuilder(t)
	long := strings.Repeat(rawSubject, keyspace.MaxFieldLen/len(rawSubject)+1)
	for _, tc := range []struct {
		name string
		call func() (string, error)
		want error
	}{
		{"bad capability", func() (string, error) { return b.TaggedKey("Rate", "api", "state", "t", "f") }, keyspace.ErrInvalidSegment},
		{"no fields", func() (string, error) { return b.TaggedKey("rate", "api", "state", "t") }, keyspace.ErrInvalidFields},
		{"long tag field", func() (string, error) { return b.TaggedKey("rate", "api", "state", long, "f") }, keyspace.ErrInvalidFields},
		{"long field", func() (string, error) { return b.TaggedKey("rate", "api", "state", "t", long) }, keyspace.ErrInvalidFields},
		{"zero builder", func() (string, error) { return (&keyspace.Builder{}).TaggedKey("rate", "api", "state", "t", "f") }, keyspace.ErrZeroSecret},
		{"slot tag of a long field", func() (string, error) { return b.SlotTag(long) }, keyspace.ErrInvalidFields},
		{"slot tag of a zero builder", func() (string, error) { return (*keyspace.Builder)(nil).SlotTag("t") }, keyspace.ErrZeroSecret},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, err := tc.call()
			require.Error(t, err)
			assert.True(t, errors.Is(err, tc.want), "%v", err)
			assert.Empty(t, k)
			assert.NotContains(t, err.Error(), rawSubject)
		})
	}
	// The tag field is not part of the digest: the same fields under two
	// tags differ only in the tag.
	k1, err := b.TaggedKey("rate", "api", "state", "a", "f")
	require.NoError(t, err)
	k2, err := b.TaggedKey("rate", "api", "state", "b", "f")
	require.NoError(t, err)
	assert.Equal(t, k1[len(k1)-keyspace.TaggedDigestLen:], k2[len(k2)-keyspace.TaggedDigestLen:])
	assert.NotContains(t, k1, rawSubject)
}
