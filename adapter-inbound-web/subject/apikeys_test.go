package subject

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func hexDigest(key string) string {
	s := sha256.Sum256([]byte(key))
	return hex.EncodeToString(s[:])
}

func TestParseAPIKeyDigests(t *testing.T) {
	a, b := hexDigest("key-a"), hexDigest("key-b")
	got, err := ParseAPIKeyDigests(strings.NewReader("# keys for the demo\n\n" + a + "\n  " + strings.ToUpper(b) + "  \r\n"))
	require.NoError(t, err)
	assert.Equal(t, []APIKeyDigest{DigestAPIKey("key-a"), DigestAPIKey("key-b")}, got)
	assert.Equal(t, a, got[0].String())

	for _, c := range []struct{ name, text, want string }{
		{"empty", "", "no digest"},
		{"only comments", "# nothing\n\n", "no digest"},
		{"raw key pasted", a + "\nmy-raw-secret-key\n", "line 2: want a SHA-256 digest of 64 hex digits, got 17 characters"},
		{"not hex", a + "\n" + strings.Repeat("z", 64) + "\n", "line 2: want a SHA-256 digest of 64 hex digits: not hex"},
		{"sha1", strings.Repeat("a", 40), "line 1"},
		{"too many", strings.Repeat(a+"\n", MaxAPIKeys+1), fmt.Sprintf("line %d: more than %d digests", MaxAPIKeys+1, MaxAPIKeys)},
		{"endless line", strings.Repeat("a", 70<<10), "line 1 is too long"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseAPIKeyDigests(strings.NewReader(c.text))
			require.ErrorIs(t, err, ErrInvalidConfig)
			assert.Contains(t, err.Error(), c.want)
			assert.NotContains(t, err.Error(), "my-raw-secret-key", "a line's content is never echoed")
		})
	}
}

func TestReadAPIKeysFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "keys")
	require.NoError(t, os.WriteFile(path, []byte(hexDigest("k")+"\n"), 0o600))
	got, err := ReadAPIKeysFile(path)
	require.NoError(t, err)
	assert.Equal(t, []APIKeyDigest{DigestAPIKey("k")}, got)

	_, err = ReadAPIKeysFile(filepath.Join(dir, "missing"))
	require.ErrorIs(t, err, ErrInvalidConfig)
	require.NoError(t, os.WriteFile(path, []byte("nope\n"), 0o600))
	_, err = ReadAPIKeysFile(path)
	require.ErrorIs(t, err, ErrInvalidConfig)
	assert.Contains(t, err.Error(), path+": ")
}

func keyRequest(keys ...string) *http.Request {
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	req.RemoteAddr = "192.0.2.1:1"
	for _, k := range keys {
		req.Header.Add(APIKeyHeader, k)
	}
	return req
}

func TestAPIKeysIdentify(t *testing.T) {
	keys, err := NewAPIKeys([]APIKeyDigest{DigestAPIKey("key-a"), DigestAPIKey("key-b")})
	require.NoError(t, err)
	assert.Equal(t, 2, keys.Len())

	a, err := keys.Identify(keyRequest("key-a"))
	require.NoError(t, err)
	assert.Equal(t, KindAPIKey, a.Kind())
	assert.NotContains(t, a.key, "key-a", "the identity holds the digest, not the key")
	again, err := keys.Identify(keyRequest("  key-a "))
	require.NoError(t, err)
	assert.Equal(t, a, again, "surrounding blanks are trimmed")
	b, err := keys.Identify(keyRequest("key-b"))
	require.NoError(t, err)
	assert.NotEqual(t, a, b)

	for _, c := range []struct {
		name string
		keys []string
		want error
	}{
		{"no key", nil, ErrUnauthenticated},
		{"blank key", []string{"  "}, ErrUnauthenticated},
		{"unknown key", []string{"key-c"}, ErrUnauthenticated},
		{"a known key's digest is no key", []string{hexDigest("key-a")}, ErrUnauthenticated},
		{"too long", []string{strings.Repeat("k", MaxAPIKeyLen+1)}, ErrUnauthenticated},
		{"two keys", []string{"key-a", "key-b"}, ErrAPIKeyAmbiguous},
	} {
		t.Run(c.name, func(t *testing.T) {
			id, err := keys.Identify(keyRequest(c.keys...))
			require.ErrorIs(t, err, c.want)
			assert.True(t, id.IsZero())
			for _, k := range c.keys {
				if strings.TrimSpace(k) != "" {
					assert.NotContains(t, err.Error(), k[:min(len(k), 16)])
				}
			}
		})
	}
}

func TestAPIKeysReplace(t *testing.T) {
	keys, err := NewAPIKeys([]APIKeyDigest{DigestAPIKey("old")})
	require.NoError(t, err)
	_, err = NewAPIKeys(nil)
	require.ErrorIs(t, err, ErrInvalidConfig)

	require.ErrorIs(t, keys.Replace(nil), ErrInvalidConfig)
	_, err = keys.Identify(keyRequest("old"))
	require.NoError(t, err, "a rejected replacement leaves the set unchanged")

	fresh := []APIKeyDigest{DigestAPIKey("new")}
	require.NoError(t, keys.Replace(fresh))
	fresh[0] = DigestAPIKey("mutated")
	_, err = keys.Identify(keyRequest("old"))
	require.ErrorIs(t, err, ErrUnauthenticated, "the old key is gone")
	_, err = keys.Identify(keyRequest("new"))
	require.NoError(t, err, "the set is a copy of the caller's slice")

	// Concurrent readers and a writer (run with -race).
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 200 {
				_, err := keys.Identify(keyRequest("new"))
				if err != nil && !errors.Is(err, ErrUnauthenticated) {
					t.Errorf("reader %d: %v", i, err)
					return
				}
			}
		}()
	}
	for range 200 {
		require.NoError(t, keys.Replace([]APIKeyDigest{DigestAPIKey("new")}))
	}
	wg.Wait()
}

func TestContainsConstantTime(t *testing.T) {
	set := []APIKeyDigest{DigestAPIKey("a"), DigestAPIKey("b"), DigestAPIKey("c")}
	ks := newKeySet(set)
	assert.Equal(t, 3, ks.len())
	for i := range set {
		assert.True(t, ks.contains(&set[i]))
	}
	d := DigestAPIKey("d")
	assert.False(t, ks.contains(&d))
	for bit := range 256 { // one bit off anywhere, in every word: no match
		near := set[1]
		near[bit/8] ^= 1 << (bit % 8)
		assert.False(t, ks.contains(&near), "bit %d", bit)
	}
	assert.False(t, newKeySet(nil).contains(&set[0]))
}

func BenchmarkAPIKeysIdentify(b *testing.B) {
	for _, n := range []int{10, 1000, MaxAPIKeys} {
		b.Run(fmt.Sprint(n, "keys"), func(b *testing.B) {
			set := make([]APIKeyDigest, n)
			for i := range set {
				set[i] = DigestAPIKey(fmt.Sprint("key-", i))
			}
			keys, err := NewAPIKeys(set)
			if err != nil {
				b.Fatal(err)
			}
			req := keyRequest(fmt.Sprint("key-", n/2))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := keys.Identify(req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
