package keyspace_test

import (
	"encoding/base64"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/shared-contract/keyspace"
)

func TestSegmentValidation(t *testing.T) {
	const marker = "zzsubjectzz" // must never be echoed in an error
	tests := []struct {
		seg string
		ok  bool
	}{
		{"a", true}, {"0", true}, {"tlb", true}, {"a.b_c-d", true}, {"a-", true}, {"9.", true},
		{strings.Repeat("a", keyspace.MaxSegmentLen), true},
		{strings.Repeat("a", keyspace.MaxSegmentLen+1), false},
		{"", false}, {".a", false}, {"_a", false}, {"-a", false}, {"A", false}, {"aB", false},
		{"a:b", false}, {"a*", false}, {"a b", false}, {"a/b", false}, {"é", false}, {"a\x00", false},
		{marker + ":" + marker, false}, {strings.ToUpper(marker), false},
		{strings.Repeat(marker, 10), false},
	}
	b := newBuilder(t)
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%q", tt.seg), func(t *testing.T) {
			assert.Equal(t, tt.ok, keyspace.IsSegment(tt.seg))
			s, err := keyspace.NewSecret(rawSecret)
			require.NoError(t, err)
			_, err = keyspace.NewBuilder(tt.seg, s)
			checkSegErr(t, err, tt.ok, "prefix", tt.seg)
			for _, pos := range []string{"capability", "region", "kind"} {
				args := map[string]string{"capability": "rate", "region": "api", "kind": "state"}
				args[pos] = tt.seg
				key, err := b.Key(args["capability"], args["region"], args["kind"], "f")
				checkSegErr(t, err, tt.ok, pos, tt.seg)
				if tt.ok {
					assertKeyFormat(t, key, "tlb", args["capability"], args["region"], args["kind"])
				}
			}
		})
	}
}

func checkSegErr(t *testing.T, err error, ok bool, pos, seg string) {
	t.Helper()
	if ok {
		require.NoError(t, err)
		return
	}
	require.ErrorIs(t, err, keyspace.ErrInvalidSegment)
	assert.Contains(t, err.Error(), pos, "names the argument")
	if len(seg) >= 3 {
		assert.NotContains(t, err.Error(), seg, "echoes the value")
	}
	assert.NotContains(t, err.Error(), "zzsubjectzz")
}

func TestFieldValidation(t *testing.T) {
	const marker = "zzrawsubjectzz"
	many := func(n int) []string {
		f := make([]string, n)
		for i := range f {
			f[i] = marker
		}
		return f
	}
	tests := []struct {
		name   string
		fields []string
		ok     bool
	}{
		{"no fields", nil, false},
		{"one field", many(1), true},
		{"MaxFields", many(keyspace.MaxFields), true},
		{"MaxFields+1", many(keyspace.MaxFields + 1), false},
		{"empty field", []string{""}, true},
		{"field of MaxFieldLen", []string{strings.Repeat(marker, 100)[:keyspace.MaxFieldLen]}, true},
		{"field of MaxFieldLen+1", []string{strings.Repeat(marker, 100)[:keyspace.MaxFieldLen+1]}, false},
		{"second field too long", []string{"ok", strings.Repeat(marker, 100)}, false},
	}
	b := newBuilder(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key, err := b.Key("rate", "api", "state", tt.fields...)
			if tt.ok {
				require.NoError(t, err)
				assertKeyFormat(t, key, "tlb", "rate", "api", "state")
				return
			}
			require.ErrorIs(t, err, keyspace.ErrInvalidFields)
			assert.NotContains(t, err.Error(), marker)
		})
	}
}

// TestDigestValidatesLikeKey: Digest refuses exactly what Key refuses, with
// the same errors, and its result is base64url of DigestLen characters.
func TestDigestValidatesLikeKey(t *testing.T) {
	b := newBuilder(t)
	tests := []struct {
		name                   string
		capability, region, kd string
		fields                 []string
	}{
		{"valid", "subject", "web", "ip", []string{"203.0.113.7"}},
		{"empty field", "subject", "web", "ip", []string{""}},
		{"bad capability", "Subject", "web", "ip", []string{"x"}},
		{"bad region", "subject", "", "ip", []string{"x"}},
		{"bad kind", "subject", "web", "i:p", []string{"x"}},
		{"no fields", "subject", "web", "ip", nil},
		{"long field", "subject", "web", "ip", []string{strings.Repeat("x", keyspace.MaxFieldLen+1)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key, kerr := b.Key(tt.capability, tt.region, tt.kd, tt.fields...)
			d, derr := b.Digest(tt.capability, tt.region, tt.kd, tt.fields...)
			if kerr != nil {
				require.Error(t, derr)
				assert.Equal(t, kerr.Error(), derr.Error())
				assert.Empty(t, d)
				return
			}
			require.NoError(t, derr)
			require.Len(t, d, keyspace.DigestLen)
			assert.True(t, strings.HasSuffix(key, ":"+d), "Digest is Key's last segment")
			sum, err := base64.RawURLEncoding.Strict().DecodeString(d)
			require.NoError(t, err, "unpadded base64url")
			assert.Len(t, sum, 32, "an HMAC-SHA256")
		})
	}
}

func TestZeroBuilder(t *testing.T) {
	var nilB *keyspace.Builder
	_, err := nilB.Key("rate", "api", "state", "x")
	assert.ErrorIs(t, err, keyspace.ErrZeroSecret)
	_, err = nilB.Digest("rate", "api", "state", "x")
	assert.ErrorIs(t, err, keyspace.ErrZeroSecret)
	_, err = (&keyspace.Builder{}).Key("rate", "api", "state", "x")
	assert.ErrorIs(t, err, keyspace.ErrZeroSecret)
	assert.Equal(t, "keyspace.Builder(nil)", nilB.String())
}
