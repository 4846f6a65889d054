package localimit

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-inbound-web/subject"
)

func TestMiddleware(t *testing.T) {
	// Rate 0.5/s: a client that used its single token waits 2s.
	l := newLimiter(t, Config{Rate: 0.5, Burst: 1, MaxClients: 100, IdleTTL: time.Minute})
	ids, err := subject.NewResolver(subject.Config{})
	require.NoError(t, err)
	calls := 0
	h := l.Wrap(ids, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		calls++
		_, _ = w.Write([]byte("ok"))
	}))

	type step struct {
		name, remote, apiKey string
		status               int
		retryAfter           string
	}
	steps := []step{
		{name: "first from ip", remote: "192.0.2.1:1", status: 200},
		{name: "second from ip", remote: "192.0.2.1:2", status: 429, retryAfter: "2"},
		{name: "other ip", remote: "192.0.2.2:1", status: 200},
		{name: "an api key does not make a new client", remote: "192.0.2.1:1", apiKey: "key-one", status: 429, retryAfter: "2"},
		{name: "nor does a fresh one", remote: "192.0.2.1:3", apiKey: "key-two", status: 429, retryAfter: "2"},
		{name: "an api key seen before is no client either", remote: "198.51.100.1:1", apiKey: "key-one", status: 200},
		{name: "oversized api key is ignored", remote: "192.0.2.3:1", apiKey: strings.Repeat("k", 17), status: 200},
		{name: "no client address", remote: "@", status: 500},
	}
	wantCalls := 0
	for _, s := range steps {
		req := httptest.NewRequest(http.MethodGet, "/api/v1/ping", nil)
		req.RemoteAddr = s.remote
		if s.apiKey != "" {
			req.Header.Set(subject.APIKeyHeader, s.apiKey)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		assert.Equal(t, s.status, rec.Code, s.name)
		assert.Equal(t, s.retryAfter, rec.Header().Get("Retry-After"), s.name)
		if s.status == 200 {
			wantCalls++
			assert.Equal(t, "ok", rec.Body.String(), s.name)
		} else {
			assert.Equal(t, "application/problem+json", rec.Header().Get("Content-Type"), s.name)
			assert.Contains(t, rec.Body.String(), `"status":`, s.name)
			assert.NotContains(t, rec.Body.String(), "key-one", s.name)
			assert.NotContains(t, rec.Body.String(), "192.0.2", s.name)
		}
		if s.status == 429 {
			// Burst 1 at 0.5/s, just emptied: 2s to one token and to full.
			assert.Equal(t, `"local";r=0;t=2`, rec.Header().Get("RateLimit"), s.name)
			assert.Equal(t, `"local";q=1;w=2`, rec.Header().Get("RateLimit-Policy"), s.name)
			assert.Equal(t, "1", rec.Header().Get("RateLimit-Limit"), s.name)
			assert.Equal(t, "0", rec.Header().Get("RateLimit-Remaining"), s.name)
			assert.Equal(t, "2", rec.Header().Get("RateLimit-Reset"), s.name)
		} else {
			assert.Empty(t, rec.Header().Values("RateLimit"), "no field on an admitted request: %s", s.name)
			assert.Empty(t, rec.Header().Get("RateLimit-Limit"), s.name)
		}
	}
	assert.Equal(t, wantCalls, calls, "next runs only for admitted requests")
}

func TestWrapRejectsNil(t *testing.T) {
	l := newLimiter(t, DefaultConfig())
	ids, err := subject.NewResolver(subject.Config{})
	require.NoError(t, err)
	assert.Panics(t, func() { l.Wrap(nil, http.NotFoundHandler()) })
	assert.Panics(t, func() { l.Wrap(ids, nil) })
}

// TestMiddlewareFieldsOfItsBucket: the 429 describes the local bucket in the
// draft's syntax; OmitLegacyFields drops the three older fields.
func TestMiddlewareFieldsOfItsBucket(t *testing.T) {
	l := newLimiter(t, Config{Rate: 1, Burst: 5, MaxClients: 100, IdleTTL: time.Minute})
	ids, err := subject.NewResolver(subject.Config{})
	require.NoError(t, err)
	h := l.WrapWith(ids, http.NotFoundHandler(), WrapOptions{OmitLegacyFields: true})
	var rec *httptest.ResponseRecorder
	for range 6 {
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.RemoteAddr = "192.0.2.9:1"
		rec = httptest.NewRecorder()
		h.ServeHTTP(rec, req)
	}
	require.Equal(t, http.StatusTooManyRequests, rec.Code)
	// Five tokens spent within far less than a second at 1/s: r is 0, and
	// more than 4 tokens are missing, so the bucket is full in 5s.
	assert.Equal(t, `"local";r=0;t=5`, rec.Header().Get("RateLimit"))
	assert.Equal(t, `"local";q=5;w=5`, rec.Header().Get("RateLimit-Policy"))
	assert.Equal(t, "1", rec.Header().Get("Retry-After"))
	for _, f := range []string{"RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset"} {
		assert.Empty(t, rec.Header().Values(f), f)
	}
}
