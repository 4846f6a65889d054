package keyspace_test

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/shared-contract/keyspace"
)

// rawSecret is recognisable in any encoding a leak could take.
var rawSecret = []byte("THE-KEYSPACE-SECRET-must-never-leak!")

const rawSubject = "alice@example.com|203.0.113.9|sk_live_abcdef"

func newBuilder(t testing.TB) *keyspace.Builder {
	t.Helper()
	s, err := keyspace.NewSecret(rawSecret)
	require.NoError(t, err)
	b, err := keyspace.NewBuilder(keyspace.DefaultPrefix, s)
	require.NoError(t, err)
	return b
}

// leakForms are the encodings in which the secret or subject could show up.
func leakForms(b []byte) []string {
	dec := strings.Trim(fmt.Sprint(b[:6]), "[]") // "84 72 69 ..." as %v of []byte prints
	return []string{
		string(b), hex.EncodeToString(b), strings.ToUpper(hex.EncodeToString(b)),
		base64.StdEncoding.EncodeToString(b), base64.RawURLEncoding.EncodeToString(b),
		dec, fmt.Sprintf("%q", b)[1:12], fmt.Sprintf("%#v", b)[:30],
	}
}

func assertNoLeak(t *testing.T, out string, secrets ...[]byte) {
	t.Helper()
	for _, s := range secrets {
		for _, form := range leakForms(s) {
			require.NotContains(t, out, form)
		}
	}
}

// holder is how other packages keep a Secret or a Builder: in unexported
// fields, printed by reflection.
type holder struct {
	name    string
	secret  keyspace.Secret
	builder *keyspace.Builder
}

type exportedHolder struct {
	Secret  keyspace.Secret
	Builder *keyspace.Builder
}

func TestSecretAndBuilderNeverPrintTheSecret(t *testing.T) {
	b := newBuilder(t)
	s, err := keyspace.NewSecret(rawSecret)
	require.NoError(t, err)
	values := []any{s, &s, b, holder{"h", s, b}, &holder{"h", s, b}, exportedHolder{s, b}, []any{s, b}, map[string]any{"s": s}}
	verbs := []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d", "%p", "%T", "%08b", "%o", "%10.3f", "%U", "%c", "%t", "%e"}
	for _, v := range values {
		for _, verb := range verbs {
			out := fmt.Sprintf(verb, v)
			assertNoLeak(t, out, rawSecret)
		}
		assertNoLeak(t, fmt.Sprint(v)+fmt.Sprintln(v), rawSecret)
	}
	assert.Equal(t, keyspace.Redacted, s.String())
	assert.Equal(t, "keyspace.Secret([redacted])", s.GoString())
	assert.Equal(t, "[redacted]", fmt.Sprintf("%x", s))
	assert.Equal(t, "keyspace.Builder(prefix=tlb, secret=[redacted])", b.String())
	assert.Equal(t, b.String(), b.GoString())
	assert.Equal(t, b.String(), fmt.Sprintf("%d", b))

	for _, v := range []any{s, b, exportedHolder{s, b}} {
		j, err := json.Marshal(v)
		require.NoError(t, err)
		assertNoLeak(t, string(j), rawSecret)
		assert.Contains(t, string(j), keyspace.Redacted)
	}

	var buf bytes.Buffer
	for _, h := range []slog.Handler{slog.NewTextHandler(&buf, nil), slog.NewJSONHandler(&buf, nil)} {
		slog.New(h).Info("built", "secret", s, "builder", b, "holder", holder{"h", s, b}, "exported", exportedHolder{s, b})
	}
	assertNoLeak(t, buf.String(), rawSecret)
	assert.Contains(t, buf.String(), keyspace.Redacted)
}

func TestNewSecret(t *testing.T) {
	for _, n := range []int{0, 1, 16, keyspace.MinSecretLen - 1} {
		t.Run(fmt.Sprintf("%d bytes rejected", n), func(t *testing.T) {
			raw := bytes.Repeat([]byte("Q"), n)
			s, err := keyspace.NewSecret(raw)
			require.ErrorIs(t, err, keyspace.ErrSecretTooShort)
			assert.True(t, s.IsZero())
			assert.Contains(t, err.Error(), fmt.Sprintf("%d bytes", n), "names the length")
			if n > 0 {
				assert.NotContains(t, err.Error(), string(raw), "never the bytes")
			}
		})
	}
	t.Run("31 distinctive bytes do not appear", func(t *testing.T) {
		_, err := keyspace.NewSecret(rawSecret[:31])
		require.Error(t, err)
		assertNoLeak(t, err.Error(), rawSecret[:31])
	})
	for _, n := range []int{keyspace.MinSecretLen, 64, 1000} {
		t.Run(fmt.Sprintf("%d bytes accepted", n), func(t *testing.T) {
			s, err := keyspace.NewSecret(bytes.Repeat([]byte{1}, n))
			require.NoError(t, err)
			assert.False(t, s.IsZero())
			assert.Equal(t, n, s.Len())
		})
	}
	t.Run("zero secret", func(t *testing.T) {
		var s keyspace.Secret
		assert.True(t, s.IsZero())
		assert.Zero(t, s.Len())
		_, err := keyspace.NewBuilder("tlb", s)
		assert.ErrorIs(t, err, keyspace.ErrZeroSecret)
	})
	t.Run("input is copied", func(t *testing.T) {
		raw := bytes.Repeat([]byte{7}, 32)
		s, err := keyspace.NewSecret(raw)
		require.NoError(t, err)
		b, err := keyspace.NewBuilder("tlb", s)
		require.NoError(t, err)
		before, err := b.Key("rate", "api", "state", "x")
		require.NoError(t, err)
		raw[0] = 8
		after, err := b.Key("rate", "api", "state", "x")
		require.NoError(t, err)
		assert.Equal(t, before, after)
	})
}

func TestKeyNeverContainsSubjectOrSecret(t *testing.T) {
	b := newBuilder(t)
	key, err := b.Key("rate", "api", "state", "api", "1", "token_bucket", rawSubject)
	require.NoError(t, err)
	assertNoLeak(t, key, rawSecret, []byte(rawSubject))
	for _, part := range strings.Split(rawSubject, "|") {
		assert.NotContains(t, key, part)
	}
	assertKeyFormat(t, key, "tlb", "rate", "api", "state")
}

func TestKeyDistinguishes(t *testing.T) {
	b := newBuilder(t)
	k := func(capability, region, kind string, fields ...string) string {
		t.Helper()
		key, err := b.Key(capability, region, kind, fields...)
		require.NoError(t, err)
		return key
	}
	pairs := []struct {
		name string
		a, b string
	}{
		{"field boundary ab|c vs a|bc", k("rate", "api", "state", "ab", "c"), k("rate", "api", "state", "a", "bc")},
		{"a|b vs ab", k("rate", "api", "state", "a", "b"), k("rate", "api", "state", "ab")},
		{"empty field vs no extra field", k("rate", "api", "state", "a", ""), k("rate", "api", "state", "a")},
		{"field order", k("rate", "api", "state", "a", "b"), k("rate", "api", "state", "b", "a")},
		{"revision change", k("rate", "api", "state", "api", "1", "fixed_window", rawSubject), k("rate", "api", "state", "api", "2", "fixed_window", rawSubject)},
		{"algorithm change", k("rate", "api", "state", "api", "1", "fixed_window", rawSubject), k("rate", "api", "state", "api", "1", "token_bucket", rawSubject)},
		{"kind is in the digest", k("cache", "r", "a", "x"), k("cache", "r", "b", "x")},
		{"capability is in the digest", k("cache", "r", "k", "x"), k("rate", "r", "k", "x")},
		{"segment vs field", k("rate", "ab", "state", "c"), k("rate", "a", "state", "bc")},
	}
	for _, p := range pairs {
		assert.NotEqual(t, p.a, p.b, p.name)
		// Not only the visible segments: the digests differ.
		assert.NotEqual(t, p.a[len(p.a)-keyspace.DigestLen:], p.b[len(p.b)-keyspace.DigestLen:], p.name)
	}
	// Deterministic.
	assert.Equal(t, k("rate", "api", "state", "x"), k("rate", "api", "state", "x"))
	// Another secret, same inputs: another digest.
	s2, err := keyspace.NewSecret(bytes.Repeat([]byte{9}, 32))
	require.NoError(t, err)
	b2, err := keyspace.NewBuilder("tlb", s2)
	require.NoError(t, err)
	other, err := b2.Key("rate", "api", "state", "x")
	require.NoError(t, err)
	assert.NotEqual(t, k("rate", "api", "state", "x"), other)
}

func TestPattern(t *testing.T) {
	b := newBuilder(t)
	assert.Equal(t, "tlb:rate:*", b.Pattern("rate"))
	assert.Equal(t, "tlb:cache:*", b.Pattern("cache"))
	assert.Equal(t, "", b.Pattern("*"))
	assert.Equal(t, "", b.Pattern(""))
	assert.Equal(t, "tlb", b.Prefix())
	key, err := b.Key("rate", "api", "state", "x")
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(key, strings.TrimSuffix(b.Pattern("rate"), "*")))
}

// TestKeyConcurrent: one Builder used from many goroutines gives the same
// keys as sequential use (run with -race).
func TestKeyConcurrent(t *testing.T) {
	b := newBuilder(t)
	const workers, perWorker = 8, 200
	want := make([]string, perWorker)
	for i := range want {
		k, err := b.Key("rate", "api", "state", "api", "1", "fixed_window", fmt.Sprintf("subject-%04d-%s", i, strings.Repeat("x", i)))
		require.NoError(t, err)
		want[i] = k
	}
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for n := 0; n < perWorker; n++ {
				i := (n + w*37) % perWorker // different order per worker
				k, err := b.Key("rate", "api", "state", "api", "1", "fixed_window", fmt.Sprintf("subject-%04d-%s", i, strings.Repeat("x", i)))
				if err != nil || k != want[i] {
					errs <- fmt.Errorf("worker %d item %d: %q, %v", w, i, k, err)
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestKeyAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items at random under the race detector")
	}
	b := newBuilder(t)
	subject := strings.Repeat("s", 43)
	_, _ = b.Key("rate", "api", "state", "api", "1", "token_bucket", subject) // warm the pool
	allocs := testing.AllocsPerRun(200, func() {
		if _, err := b.Key("rate", "api", "state", "api", "1", "token_bucket", subject); err != nil {
			panic(err)
		}
	})
	t.Logf("Key: %.1f allocs/op", allocs)
	assert.LessOrEqual(t, allocs, 2.0)
	allocs = testing.AllocsPerRun(200, func() {
		if _, err := b.Digest("subject", "web", "ip", subject); err != nil {
			panic(err)
		}
	})
	t.Logf("Digest: %.1f allocs/op", allocs)
	assert.LessOrEqual(t, allocs, 1.0, "the digest string only")
}

func BenchmarkKey(b *testing.B) {
	s, err := keyspace.NewSecret(rawSecret)
	require.NoError(b, err)
	kb, err := keyspace.NewBuilder(keyspace.DefaultPrefix, s)
	require.NoError(b, err)
	subject := strings.Repeat("s", 43)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := kb.Key("rate", "api", "state", "api", "1", "token_bucket", subject); err != nil {
				b.Fatal(err)
			}
		}
	})
}
