package keyspace_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/shared-contract/keyspace"
)

var update = flag.Bool("update", false, "rewrite testdata/keys-v1.json from the current derivation")

const goldenPath = "testdata/keys-v1.json"

type vector struct {
	Name       string   `json:"name"`
	SecretHex  string   `json:"secretHex"`
	Prefix     string   `json:"prefix"`
	Capability string   `json:"capability"`
	Region     string   `json:"region"`
	Kind       string   `json:"kind"`
	Fields     []string `json:"fields"`
	Key        string   `json:"key"`
}

type goldenFile struct {
	Format  string   `json:"format"`
	Note    string   `json:"note"`
	Vectors []vector `json:"vectors"`
}

const (
	secretA = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
	// secretB is exactly one SHA-256 block (64 bytes).
	secretB = "746563682d6c6f672d6261636b656e64206b6579737061636520746573742073656372657420422c2065786163746c79203634206279746573206c6f6e672121"
	// secretC is longer than a block, so HMAC hashes it before use.
	secretC = "746563682d6c6f672d6261636b656e64206b657973706163652074657374207365637265742043206973206c6f6e676572207468616e207468652036342d62797465205348412d32353620626c6f636b2c20736f20484d4143206861736865732069742066697273742e"
	// digest43 looks like a real subject digest (base64url of 32 bytes).
	digest43 = "q1w2e3r4t5y6u7i8o9p0a1s2d3f4g5h6j7k8l9z0x1c"
)

// goldenInputs are the vectors' inputs; the expected keys live in the file.
func goldenInputs() []vector {
	sixteen := make([]string, keyspace.MaxFields)
	for i := range sixteen {
		sixteen[i] = strings.Repeat("f", i)
	}
	seg64 := strings.Repeat("s", keyspace.MaxSegmentLen)
	return []vector{
		{Name: "rate state, token bucket rev 1", SecretHex: secretA, Prefix: "tlb", Capability: "rate", Region: "api", Kind: "state", Fields: []string{"api", "1", "token_bucket", digest43}},
		{Name: "rate state, token bucket rev 2 (revision rolls the key)", SecretHex: secretA, Prefix: "tlb", Capability: "rate", Region: "api", Kind: "state", Fields: []string{"api", "2", "token_bucket", digest43}},
		{Name: "rate state, fixed window rev 3", SecretHex: secretA, Prefix: "tlb", Capability: "rate", Region: "login", Kind: "state", Fields: []string{"login", "3", "fixed_window", digest43}},
		{Name: "rate state, sliding counter", SecretHex: secretA, Prefix: "tlb", Capability: "rate", Region: "search.v2", Kind: "state", Fields: []string{"search.v2", "1", "sliding_window_counter", digest43}},
		{Name: "field boundary ab|c", SecretHex: secretA, Prefix: "tlb", Capability: "rate", Region: "api", Kind: "state", Fields: []string{"ab", "c"}},
		{Name: "field boundary a|bc", SecretHex: secretA, Prefix: "tlb", Capability: "rate", Region: "api", Kind: "state", Fields: []string{"a", "bc"}},
		{Name: "single field abc", SecretHex: secretA, Prefix: "tlb", Capability: "rate", Region: "api", Kind: "state", Fields: []string{"abc"}},
		{Name: "cache entry", SecretHex: secretA, Prefix: "tlb", Capability: "cache", Region: "sessions", Kind: "entry", Fields: []string{"user:42"}},
		{Name: "same fields, other kind", SecretHex: secretA, Prefix: "tlb", Capability: "cache", Region: "sessions", Kind: "lock", Fields: []string{"user:42"}},
		{Name: "empty field", SecretHex: secretA, Prefix: "tlb", Capability: "cache", Region: "r", Kind: "k", Fields: []string{""}},
		{Name: "two empty fields", SecretHex: secretA, Prefix: "tlb", Capability: "cache", Region: "r", Kind: "k", Fields: []string{"", ""}},
		{Name: "sixteen fields", SecretHex: secretA, Prefix: "tlb", Capability: "cache", Region: "r", Kind: "k", Fields: sixteen},
		{Name: "field of MaxFieldLen bytes", SecretHex: secretA, Prefix: "tlb", Capability: "cache", Region: "r", Kind: "k", Fields: []string{strings.Repeat("x", keyspace.MaxFieldLen)}},
		{Name: "field of 128 bytes (varint length is 2 bytes)", SecretHex: secretA, Prefix: "tlb", Capability: "cache", Region: "r", Kind: "k", Fields: []string{strings.Repeat("y", 128)}},
		{Name: "segments of MaxSegmentLen", SecretHex: secretA, Prefix: seg64, Capability: seg64, Region: seg64, Kind: seg64, Fields: []string{"x"}},
		{Name: "other prefix", SecretHex: secretA, Prefix: "tlb-staging.eu_1", Capability: "rate", Region: "api", Kind: "state", Fields: []string{"api", "1", "token_bucket", digest43}},
		{Name: "secret longer than a SHA-256 block", SecretHex: secretC, Prefix: "tlb", Capability: "rate", Region: "api", Kind: "state", Fields: []string{"api", "1", "token_bucket", digest43}},
		{Name: "other secret", SecretHex: secretB, Prefix: "tlb", Capability: "rate", Region: "api", Kind: "state", Fields: []string{"api", "1", "token_bucket", digest43}},
		{Name: "unicode and separators in fields", SecretHex: secretA, Prefix: "tlb", Capability: "cache", Region: "r", Kind: "k", Fields: []string{"héllo 世界", "a:b:c", "line\nbreak", "*?[]"}},
	}
}

// referenceKey is the derivation written out from docs/contract.md section 3 and
// the keyspace doc, independently of Builder: HMAC-SHA256 over uvarint
// length-prefixed fields (domain, capability, region, kind, fields...),
// base64url without padding.
func referenceKey(secret []byte, prefix, capability, region, kind string, fields []string) string {
	var msg []byte
	for _, f := range append([]string{"tech-log-backend/keyspace/v1", capability, region, kind}, fields...) {
		msg = binary.AppendUvarint(msg, uint64(len(f)))
		msg = append(msg, f...)
	}
	m := hmac.New(sha256.New, secret)
	m.Write(msg)
	return strings.Join([]string{prefix, capability, region, kind, "v1", base64.RawURLEncoding.EncodeToString(m.Sum(nil))}, ":")
}

func builderFor(t testing.TB, secretHex, prefix string) *keyspace.Builder {
	t.Helper()
	raw, err := hex.DecodeString(secretHex)
	require.NoError(t, err)
	s, err := keyspace.NewSecret(raw)
	require.NoError(t, err)
	b, err := keyspace.NewBuilder(prefix, s)
	require.NoError(t, err)
	return b
}

func keyOf(t testing.TB, v vector) string {
	t.Helper()
	k, err := builderFor(t, v.SecretHex, v.Prefix).Key(v.Capability, v.Region, v.Kind, v.Fields...)
	require.NoError(t, err, v.Name)
	return k
}

// TestGoldenVectors pins the derivation: the keys in testdata/keys-v1.json
// must be reproduced by Builder and by the independent reference. Run
// `go test ./keyspace -update` to rewrite the file after adding inputs;
// a changed key for an existing vector means the derivation changed, which
// needs a new Version, not an update.
func TestGoldenVectors(t *testing.T) {
	inputs := goldenInputs()
	if *update {
		for i := range inputs {
			inputs[i].Key = keyOf(t, inputs[i])
		}
		var out bytes.Buffer
		enc := json.NewEncoder(&out)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		require.NoError(t, enc.Encode(goldenFile{
			Format:  "keyspace-vectors/v1",
			Note:    "Generated by `go test ./keyspace -update`. key = <prefix>:<capability>:<region>:<kind>:v1:base64url(HMAC-SHA256(secret, uvarint-length-prefixed domain, capability, region, kind, fields...)), domain = tech-log-backend/keyspace/v1. A changed key for an existing vector is a derivation change.",
			Vectors: inputs,
		}))
		require.NoError(t, os.MkdirAll(filepath.Dir(goldenPath), 0o755))
		require.NoError(t, os.WriteFile(goldenPath, out.Bytes(), 0o644))
		t.Logf("wrote %d vectors to %s", len(inputs), goldenPath)
	}

	raw, err := os.ReadFile(goldenPath)
	require.NoError(t, err, "run `go test ./keyspace -update` to create it")
	var golden goldenFile
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&golden))
	require.Equal(t, "keyspace-vectors/v1", golden.Format)
	require.Len(t, golden.Vectors, len(inputs), "the file and goldenInputs disagree: run -update after adding inputs")

	seen := map[string]string{}
	for i, v := range golden.Vectors {
		t.Run(v.Name, func(t *testing.T) {
			in := inputs[i]
			in.Key = v.Key
			require.Equal(t, in, v, "vector inputs changed")
			assert.Equal(t, v.Key, keyOf(t, v), "Builder no longer reproduces the golden key")
			d, err := builderFor(t, v.SecretHex, v.Prefix).Digest(v.Capability, v.Region, v.Kind, v.Fields...)
			require.NoError(t, err)
			assert.Len(t, d, keyspace.DigestLen)
			assert.Equal(t, v.Key[len(v.Key)-keyspace.DigestLen:], d, "Digest is the key's last segment")
			secret, err := hex.DecodeString(v.SecretHex)
			require.NoError(t, err)
			assert.Equal(t, v.Key, referenceKey(secret, v.Prefix, v.Capability, v.Region, v.Kind, v.Fields), "the reference derivation disagrees")
			assertKeyFormat(t, v.Key, v.Prefix, v.Capability, v.Region, v.Kind)
			prev, dup := seen[v.Key]
			assert.False(t, dup, "key of %q equals key of %q", v.Name, prev)
			seen[v.Key] = v.Name
		})
	}
}

func assertKeyFormat(t testing.TB, key, prefix, capability, region, kind string) {
	t.Helper()
	parts := strings.Split(key, ":")
	require.Len(t, parts, 6, key)
	assert.Equal(t, []string{prefix, capability, region, kind, keyspace.Version}, parts[:5])
	assert.Len(t, parts[5], keyspace.DigestLen)
	assert.Regexp(t, `^[A-Za-z0-9_-]{43}$`, parts[5])
	assert.Equal(t, len(prefix)+len(capability)+len(region)+len(kind)+len(keyspace.Version)+keyspace.DigestLen+5, len(key))
}
