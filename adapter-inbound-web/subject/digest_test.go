package subject

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/shared-contract/keyspace"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

func testSecret(t testing.TB, fill byte) keyspace.Secret {
	t.Helper()
	s, err := keyspace.NewSecret([]byte(strings.Repeat(string(fill), 32)))
	require.NoError(t, err)
	return s
}

func TestNewPseudonymizerRejectsZeroSecret(t *testing.T) {
	_, err := NewPseudonymizer(keyspace.Secret{})
	require.ErrorIs(t, err, keyspace.ErrZeroSecret)
}

func TestDigestNeverContainsIdentity(t *testing.T) {
	p, err := NewPseudonymizer(testSecret(t, 's'))
	require.NoError(t, err)
	r, err := NewResolver(Config{})
	require.NoError(t, err)

	cases := []struct{ key, remote, raw string }{
		{key: "user-api-key-0001", raw: "user-api-key-0001"},
		{key: "k-9f3a1c", raw: "k-9f3a1c"},
		{key: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQ", raw: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQ"},
		{remote: "203.0.113.7:1", raw: "203.0.113.7"},
		{remote: "[2001:db8::1]:1", raw: "2001:db8::1"},
	}
	seen := map[string]bool{}
	for _, c := range cases {
		id := Identity{kind: KindAPIKey, key: c.key}
		if c.key == "" {
			req := httptest.NewRequest(http.MethodGet, "/", nil)
			req.RemoteAddr = c.remote
			id, err = r.Identify(req)
			require.NoError(t, err)
		}
		d, err := p.Digest(id)
		require.NoError(t, err)
		require.NoError(t, d.Validate())
		assert.Len(t, string(d), DigestLen)
		assert.NotEqual(t, c.raw, string(d))
		assert.NotContains(t, string(d), c.raw)
		assert.False(t, seen[string(d)], "digests are distinct")
		seen[string(d)] = true

		again, err := p.Digest(id)
		require.NoError(t, err)
		assert.Equal(t, d, again, "deterministic")
	}
}

func TestDigestSeparatesKindsAndSecrets(t *testing.T) {
	p1, err := NewPseudonymizer(testSecret(t, 'a'))
	require.NoError(t, err)
	p2, err := NewPseudonymizer(testSecret(t, 'b'))
	require.NoError(t, err)
	r, err := NewResolver(Config{})
	require.NoError(t, err)

	keyID := Identity{kind: KindAPIKey, key: "192.0.2.1"}
	ipReq := httptest.NewRequest(http.MethodGet, "/", nil)
	ipReq.RemoteAddr = "192.0.2.1:1"
	ipID, err := r.Identify(ipReq)
	require.NoError(t, err)
	require.Equal(t, KindAPIKey, keyID.Kind())
	require.Equal(t, KindIP, ipID.Kind())

	dk, err := p1.Digest(keyID)
	require.NoError(t, err)
	di, err := p1.Digest(ipID)
	require.NoError(t, err)
	assert.NotEqual(t, dk, di, "api key and ip with the same text differ")

	dk2, err := p2.Digest(keyID)
	require.NoError(t, err)
	assert.NotEqual(t, dk, dk2, "another secret gives another digest")

	_, err = p1.Digest(Identity{})
	require.ErrorIs(t, err, ErrZeroIdentity)
}

func TestPseudonymizerNeverPrintsSecret(t *testing.T) {
	p, err := NewPseudonymizer(testSecret(t, 'q'))
	require.NoError(t, err)
	for _, f := range []string{fmt.Sprint(p), fmt.Sprintf("%+v %#v %s", p, p, p), fmt.Sprintf("%+v", *p)} {
		assert.NotContains(t, f, "qqqq")
	}
}

func TestDigestConcurrent(t *testing.T) {
	p, err := NewPseudonymizer(testSecret(t, 'c'))
	require.NoError(t, err)
	want, err := p.Digest(Identity{kind: KindAPIKey, key: "k"})
	require.NoError(t, err)
	done := make(chan ratelimit.SubjectDigest, 8)
	for range 8 {
		go func() {
			var last ratelimit.SubjectDigest
			for range 200 {
				d, err := p.Digest(Identity{kind: KindAPIKey, key: "k"})
				if err != nil {
					last = ""
					break
				}
				last = d
			}
			done <- last
		}()
	}
	for range 8 {
		assert.Equal(t, want, <-done)
	}
}

func BenchmarkDigest(b *testing.B) {
	p, err := NewPseudonymizer(testSecret(b, 'b'))
	require.NoError(b, err)
	id := Identity{kind: KindAPIKey, key: "user-api-key-0001"}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.Digest(id); err != nil {
			b.Fatal(err)
		}
	}
}
