package keyspace_test

import (
	"errors"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/shared-contract/keyspace"
)

var keyRe = regexp.MustCompile(`^tlb:[a-z0-9][a-z0-9._-]{0,63}:[a-z0-9][a-z0-9._-]{0,63}:[a-z0-9][a-z0-9._-]{0,63}:v1:[A-Za-z0-9_-]{43}$`)

// FuzzKeyspaceKey: Key never panics; an accepted key has the exact format
// and length and equals the reference derivation; an error names no field
// value; and distinct field lists give distinct keys.
// keyErrRe is every shape a Key error may take.
var keyErrRe = regexp.MustCompile(`^(invalid key segment: (capability|region|kind) (is \d+ bytes, want 1\.\.\d+|byte \d+ is not allowed: want \^\[a-z0-9\]\[a-z0-9\._-\]\*\$)|invalid key fields: (\d+ fields, want 1\.\.\d+|field \d+ is \d+ bytes, max \d+))$`)

func FuzzKeyspaceKey(f *testing.F) {
	f.Add("rate", "api", "state", "ab", "c", "", uint8(2))
	f.Add("rate", "api", "state", "a", "bc", "x", uint8(3))
	f.Add("cache", "sessions", "entry", "user:42", "", "", uint8(1))
	f.Add("RATE", ".api", "st ate", "f", "g", "h", uint8(3))
	f.Add(strings.Repeat("a", 64), strings.Repeat("b", 65), "k", strings.Repeat("x", 1025), "y", "z", uint8(2))
	f.Add("a", "b", "c", "", "", "", uint8(0))
	f.Add("a", "b", "c", "\xff\x00", "é", "\n", uint8(3))
	b := newBuilder(f)
	f.Fuzz(func(t *testing.T, capability, region, kind, f1, f2, f3 string, n uint8) {
		fields := []string{f1, f2, f3}[:n%4]
		key, err := b.Key(capability, region, kind, fields...)
		segsOK := keyspace.IsSegment(capability) && keyspace.IsSegment(region) && keyspace.IsSegment(kind)
		fieldsOK := len(fields) >= 1 && !slices.ContainsFunc(fields, func(s string) bool { return len(s) > keyspace.MaxFieldLen })
		if !segsOK || !fieldsOK {
			require.Error(t, err)
			require.True(t, errors.Is(err, keyspace.ErrInvalidSegment) || errors.Is(err, keyspace.ErrInvalidFields), "%v", err)
			require.Empty(t, key)
			// The error has a fixed shape (names, lengths, indexes): it
			// holds no byte of a field or segment value.
			require.Regexp(t, keyErrRe, err.Error())
			return
		}
		require.NoError(t, err)
		require.Regexp(t, keyRe, key)
		require.Len(t, key, len("tlb")+len(capability)+len(region)+len(kind)+len("v1")+keyspace.DigestLen+5)
		require.Equal(t, referenceKey(rawSecret, "tlb", capability, region, kind, fields), key)

		// Distinct field lists give distinct keys; equal lists equal keys.
		lists := [][]string{{f1}, {f1, f2}, {f1 + f2}, {f2, f1}, {f1, f2, f3}, {f1, f2 + f3}, {f1 + f2, f3}, {f1, "", f2}}
		keys := make([]string, len(lists))
		for i, l := range lists {
			if slices.ContainsFunc(l, func(s string) bool { return len(s) > keyspace.MaxFieldLen }) {
				continue
			}
			k, err := b.Key(capability, region, kind, l...)
			require.NoError(t, err)
			keys[i] = k
		}
		for i := range lists {
			for j := range lists {
				if keys[i] == "" || keys[j] == "" {
					continue
				}
				require.Equal(t, slices.Equal(lists[i], lists[j]), keys[i] == keys[j], "lists %q and %q", lists[i], lists[j])
			}
		}
	})
}
