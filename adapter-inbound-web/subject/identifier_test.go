package subject

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNewPrincipal(t *testing.T) {
	p, err := NewPrincipal("user:42")
	require.NoError(t, err)
	assert.Equal(t, KindPrincipal, p.Kind())
	assert.Equal(t, "subject.Identity(principal, [redacted])", fmt.Sprint(p))
	for _, bad := range []string{"", strings.Repeat("u", MaxPrincipalLen+1), "tab\there", "nul\x00", "é"} {
		_, err := NewPrincipal(bad)
		assert.ErrorIs(t, err, ErrInvalidPrincipal, "%q", bad)
	}
	_, err = NewPrincipal(strings.Repeat("u", MaxPrincipalLen))
	require.NoError(t, err)
}

func TestErrorStatus(t *testing.T) {
	for _, c := range []struct {
		err    error
		status int
	}{
		{fmt.Errorf("%w: x", ErrUnauthenticated), 401},
		{ErrAPIKeyAmbiguous, 400},
		{ErrInvalidPrincipal, 400},
		{ErrNoClientAddress, 500},
		{ErrNoIdentity, 500},
		{errors.New("an embedder's own error"), 400},
	} {
		status, title := ErrorStatus(c.err)
		assert.Equal(t, c.status, status, "%v", c.err)
		assert.NotEmpty(t, title)
	}
}

func TestRequireAndFromContext(t *testing.T) {
	keys, err := NewAPIKeys([]APIKeyDigest{DigestAPIKey("good-key")})
	require.NoError(t, err)
	var seen []Identity
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := FromContext.Identify(r)
		require.NoError(t, err)
		seen = append(seen, id)
		w.WriteHeader(http.StatusNoContent)
	})
	h := Require(keys, next)

	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, keyRequest("good-key"))
	assert.Equal(t, http.StatusNoContent, rec.Code)
	require.Len(t, seen, 1)
	assert.Equal(t, KindAPIKey, seen[0].Kind())

	for _, c := range []struct {
		keys   []string
		status int
	}{
		{nil, 401}, {[]string{"bad-key-value"}, 401}, {[]string{"good-key", "good-key"}, 400},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, keyRequest(c.keys...))
		assert.Equal(t, c.status, rec.Code)
		assert.Equal(t, "application/problem+json", rec.Header().Get("Content-Type"))
		if c.status == 401 {
			assert.Equal(t, `APIKey header="X-API-Key"`, rec.Header().Get("WWW-Authenticate"))
		}
		var body map[string]any
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body))
		assert.Equal(t, float64(c.status), body["status"])
		assert.NotContains(t, rec.Body.String(), "bad-key-value")
	}
	assert.Len(t, seen, 1, "next never runs for a refused request")

	// Without Require, FromContext has nothing.
	_, err = FromContext.Identify(httptest.NewRequest(http.MethodGet, "/", nil))
	require.ErrorIs(t, err, ErrNoIdentity)
	_, ok := IdentityFrom(WithIdentity(context.Background(), Identity{}))
	assert.False(t, ok, "a zero identity is none")

	assert.Panics(t, func() { Require(nil, next) })
	assert.Panics(t, func() { Require(keys, nil) })
}
