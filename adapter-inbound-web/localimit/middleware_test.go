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
		assert.Empty(t, rec.Header().Get("RateLimit-Limit"), s.name)
	}
	assert.Equal(t, wantCalls, calls, "next runs only for admitted requests")
}

func TestCeilSeconds(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want int64
	}{
		{0, 1}, {time.Nanosecond, 1}, {time.Millisecond, 1}, {time.Second, 1},
		{time.Second + time.Millisecond, 2}, {2 * time.Second, 2}, {90 * time.Second, 90},
	} {
		assert.Equal(t, c.want, ceilSeconds(c.d), "%v", c.d)
	}
}

func TestWrapRejectsNil(t *testing.T) {
	l := newLimiter(t, DefaultConfig())
	ids, err := subject.NewResolver(subject.Config{})
	require.NoError(t, err)
	assert.Panics(t, func() { l.Wrap(nil, http.NotFoundHandler()) })
	assert.Panics(t, func() { l.Wrap(ids, nil) })
}
