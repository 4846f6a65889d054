package edge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-inbound-web/subject"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

var t0 = time.Date(2026, 7, 28, 12, 0, 0, 0, time.UTC)

func okHandler(calls *atomic.Int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte("ok"))
	})
}

func decision(allowed bool, limit, remaining int64, retry, reset time.Duration) ratelimit.Evaluated {
	return ratelimit.Evaluated{Decision: ratelimit.Decision{
		Allowed: allowed, Limit: limit, Remaining: remaining, RetryAfter: retry,
		ResetAt: t0.Add(reset), PolicyID: "api", PolicyRevision: 1,
		Source: ratelimit.GlobalRedis, Certainty: ratelimit.Certain,
	}}
}

func TestOutcomeResponses(t *testing.T) {
	secretCause := errors.New("dial tcp 10.9.8.7:6379: secret-cause-text")
	type want struct {
		status     int
		next       bool
		retryAfter string // "" means absent
		limit      string // RateLimit-Limit; "" means no RateLimit-* fields
		remaining  string
		reset      string
		policy     string
		body       map[string]any // decoded problem body; nil means next's body
	}
	problem503 := func(kind, category string) map[string]any {
		b := map[string]any{"type": "about:blank", "title": "rate limiter unavailable", "status": float64(503), "outcome": kind, "policy": "api"}
		if category != "" {
			b["category"] = category
		}
		return b
	}
	problem429 := map[string]any{"type": "about:blank", "title": "too many requests", "status": float64(429), "policy": "api"}
	tests := []struct {
		name string
		out  ratelimit.Outcome
		want want
	}{
		{name: "allowed", out: decision(true, 10, 3, 0, 1001*time.Millisecond),
			want: want{status: 200, next: true, limit: "10", remaining: "3", reset: "2", policy: `"api";q=10`}},
		{name: "allowed, reset 1ms", out: decision(true, 10, 9, 0, time.Millisecond),
			want: want{status: 200, next: true, limit: "10", remaining: "9", reset: "1", policy: `"api";q=10`}},
		{name: "allowed, reset 1000ms", out: decision(true, 10, 9, 0, time.Second),
			want: want{status: 200, next: true, limit: "10", remaining: "9", reset: "1", policy: `"api";q=10`}},
		{name: "allowed, reset already passed", out: decision(true, 10, 10, 0, -time.Second),
			want: want{status: 200, next: true, limit: "10", remaining: "10", reset: "0", policy: `"api";q=10`}},
		{name: "allowed, remaining clamped", out: decision(true, 5, 9, 0, time.Second),
			want: want{status: 200, next: true, limit: "5", remaining: "5", reset: "1", policy: `"api";q=5`}},
		{name: "denied, retry 1ms", out: decision(false, 5, 0, time.Millisecond, time.Millisecond),
			want: want{status: 429, retryAfter: "1", limit: "5", remaining: "0", reset: "1", policy: `"api";q=5`, body: problem429}},
		{name: "denied, retry 1000ms", out: decision(false, 5, 0, time.Second, 60*time.Second),
			want: want{status: 429, retryAfter: "1", limit: "5", remaining: "0", reset: "60", policy: `"api";q=5`, body: problem429}},
		{name: "denied, retry 1001ms", out: decision(false, 5, 0, 1001*time.Millisecond, 59500*time.Millisecond),
			want: want{status: 429, retryAfter: "2", limit: "5", remaining: "0", reset: "60", policy: `"api";q=5`, body: problem429}},
		{name: "denied, retry 0 still says 1", out: decision(false, 5, 0, 0, 0),
			want: want{status: 429, retryAfter: "1", limit: "5", remaining: "0", reset: "0", policy: `"api";q=5`, body: problem429}},
		{name: "unavailable connection", out: ratelimit.Unavailable{PolicyID: "api", RetryAfter: 1500 * time.Millisecond, Category: ratelimit.CategoryConnection, Cause: secretCause},
			want: want{status: 503, retryAfter: "2", body: problem503("unavailable", "connection")}},
		{name: "unavailable deadline, no retry hint", out: ratelimit.Unavailable{PolicyID: "api", Category: ratelimit.CategoryDeadline},
			want: want{status: 503, retryAfter: "1", body: problem503("unavailable", "deadline")}},
		{name: "unavailable admission", out: ratelimit.Unavailable{PolicyID: "api", RetryAfter: time.Millisecond, Category: ratelimit.CategoryAdmission},
			want: want{status: 503, retryAfter: "1", body: problem503("unavailable", "admission")}},
		{name: "unavailable clock unsafe", out: ratelimit.Unavailable{PolicyID: "api", RetryAfter: 5 * time.Second, Category: ratelimit.CategoryClockUnsafe},
			want: want{status: 503, retryAfter: "5", body: problem503("unavailable", "clock_unsafe")}},
		{name: "unavailable negative retry", out: ratelimit.Unavailable{PolicyID: "api", RetryAfter: -time.Second, Category: ratelimit.CategoryServerRejected},
			want: want{status: 503, retryAfter: "1", body: problem503("unavailable", "server_rejected")}},
		{name: "indeterminate timeout", out: ratelimit.Indeterminate{PolicyID: "api", RetryAfter: 1000 * time.Millisecond, Category: ratelimit.CategoryTimeout, Cause: secretCause},
			want: want{status: 503, retryAfter: "1", body: problem503("indeterminate", "timeout")}},
		{name: "indeterminate connection lost", out: ratelimit.Indeterminate{PolicyID: "api", RetryAfter: 1001 * time.Millisecond, Category: ratelimit.CategoryConnectionLost},
			want: want{status: 503, retryAfter: "2", body: problem503("indeterminate", "connection_lost")}},
		{name: "incompatible malformed reply", out: ratelimit.Incompatible{PolicyID: "api", Category: ratelimit.CategoryMalformedReply, Cause: secretCause},
			want: want{status: 503, retryAfter: "1", body: problem503("incompatible", "malformed_reply")}},
		{name: "incompatible server version", out: ratelimit.Incompatible{PolicyID: "api", Category: ratelimit.CategoryServerVersion},
			want: want{status: 503, retryAfter: "1", body: problem503("incompatible", "server_version")}},
		{name: "foreign category text is not echoed", out: ratelimit.Incompatible{PolicyID: "api", Category: "Secret Cause Text"},
			want: want{status: 503, retryAfter: "1", body: problem503("incompatible", "unknown")}},
		{name: "nil outcome fails closed", out: nil,
			want: want{status: 503, retryAfter: "1", body: problem503("unknown", "")}},
		{name: "pointer to an allowed outcome fails closed", out: func() ratelimit.Outcome { e := decision(true, 10, 3, 0, time.Second); return &e }(),
			want: want{status: 503, retryAfter: "1", body: problem503("unknown", "")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			port := &fakePort{out: tt.out}
			var observed []Observation
			cfg := baseConfig(t, port, t0)
			cfg.Observer = ObserverFunc(func(o Observation) { observed = append(observed, o) })
			m, err := New(cfg)
			require.NoError(t, err)
			var calls atomic.Int64
			h := m.Wrap(okHandler(&calls))

			req := httptest.NewRequest(http.MethodGet, "/api/v1/ping", nil)
			req.Header.Set(subject.APIKeyHeader, "raw-api-key-123")
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)

			w := tt.want
			assert.Equal(t, w.status, rec.Code)
			assert.Equal(t, w.next, calls.Load() == 1, "next handler ran")
			assert.Equal(t, w.retryAfter, rec.Header().Get("Retry-After"))
			assert.Equal(t, w.limit, rec.Header().Get("RateLimit-Limit"))
			assert.Equal(t, w.remaining, rec.Header().Get("RateLimit-Remaining"))
			assert.Equal(t, w.reset, rec.Header().Get("RateLimit-Reset"))
			assert.Equal(t, w.policy, rec.Header().Get("RateLimit-Policy"))
			if w.limit != "" {
				assert.Equal(t, `"api";r=`+w.remaining+`;t=`+w.reset, rec.Header().Get("RateLimit"), "the current draft's field carries the same numbers")
			} else {
				assert.Empty(t, rec.Header().Values("RateLimit"))
			}
			if w.body == nil {
				assert.Equal(t, "ok", rec.Body.String())
			} else {
				assert.Equal(t, "application/problem+json", rec.Header().Get("Content-Type"))
				var got map[string]any
				require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &got), rec.Body.String())
				assert.Equal(t, w.body, got)
			}
			everything := rec.Body.String() + headerText(rec.Header())
			for _, secret := range []string{"raw-api-key-123", "secret-cause", "10.9.8.7", "Secret Cause", string(port.requests()[0].SubjectDigest)} {
				assert.NotContains(t, everything, secret)
			}

			require.Len(t, observed, 1)
			o := observed[0]
			assert.Equal(t, ratelimit.PolicyID("api"), o.Policy)
			assert.Equal(t, w.next, o.Admitted)
			if w.next {
				assert.Zero(t, o.Status)
			} else {
				assert.Equal(t, w.status, o.Status)
			}
		})
	}
}

func headerText(h http.Header) string {
	var b strings.Builder
	for k, vs := range h {
		b.WriteString(k + ": " + strings.Join(vs, ",") + "\n")
	}
	return b.String()
}

func TestRequestSentToPort(t *testing.T) {
	port := &fakePort{out: decision(true, 10, 9, 0, time.Second)}
	cfg := baseConfig(t, port, t0)
	m, err := New(cfg)
	require.NoError(t, err)
	var calls atomic.Int64
	h := m.Wrap(okHandler(&calls))

	do := func(ctx context.Context, apiKey, remote string) ratelimit.Request {
		req := httptest.NewRequestWithContext(ctx, http.MethodGet, "/api/x", nil)
		if apiKey != "" {
			req.Header.Set(subject.APIKeyHeader, apiKey)
		}
		req.RemoteAddr = remote
		h.ServeHTTP(httptest.NewRecorder(), req)
		reqs := port.requests()
		return reqs[len(reqs)-1]
	}

	// No context deadline: now + Timeout.
	r := do(context.Background(), "", "192.0.2.1:1")
	assert.Equal(t, t0.Add(200*time.Millisecond), r.Deadline)
	assert.Equal(t, int64(1), r.Cost)
	assert.Empty(t, r.EvaluationID)
	assert.Equal(t, ratelimit.PolicyID("api"), r.PolicyID)
	require.NoError(t, r.Validate())

	// An earlier context deadline wins.
	early, cancel := context.WithDeadline(context.Background(), t0.Add(50*time.Millisecond))
	defer cancel()
	r = do(early, "", "192.0.2.1:1")
	assert.Equal(t, t0.Add(50*time.Millisecond), r.Deadline)
	dl, ok := early.Deadline()
	require.True(t, ok)
	dls := port.ctxDeadlines()
	assert.Equal(t, dl, dls[len(dls)-1], "the request context is passed through")

	// A later context deadline loses.
	late, cancel2 := context.WithDeadline(context.Background(), t0.Add(10*time.Second))
	defer cancel2()
	r = do(late, "", "192.0.2.1:1")
	assert.Equal(t, t0.Add(200*time.Millisecond), r.Deadline)

	// The digest is stable per client IP, never the raw IP, and an
	// unverified X-API-Key does not change it (the default identity is the
	// client IP).
	ipDigest := do(context.Background(), "", "192.0.2.1:1").SubjectDigest
	assert.Equal(t, ipDigest, do(context.Background(), "", "192.0.2.1:9").SubjectDigest)
	assert.Equal(t, ipDigest, do(context.Background(), "192.0.2.1", "192.0.2.1:1").SubjectDigest)
	assert.Equal(t, ipDigest, do(context.Background(), "my-raw-api-key", "192.0.2.1:2").SubjectDigest)
	otherDigest := do(context.Background(), "my-raw-api-key", "198.51.100.1:1").SubjectDigest
	assert.NotEqual(t, ipDigest, otherDigest)
	for _, d := range []ratelimit.SubjectDigest{ipDigest, otherDigest} {
		require.NoError(t, d.Validate())
		assert.Len(t, string(d), subject.DigestLen)
		assert.NotContains(t, string(d), "192.0.2.1")
		assert.NotContains(t, string(d), "my-raw-api-key")
	}
	assert.Equal(t, int64(len(port.requests())), calls.Load())
}

func TestTrustedProxyDigest(t *testing.T) {
	port := &fakePort{out: decision(true, 10, 9, 0, time.Second)}
	cfg := baseConfig(t, port, t0)
	ids, err := subject.NewResolver(subject.Config{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}})
	require.NoError(t, err)
	cfg.Subjects = ids
	m, err := New(cfg)
	require.NoError(t, err)
	h := m.Wrap(http.NotFoundHandler())
	digest := func(remote, xff string) ratelimit.SubjectDigest {
		req := httptest.NewRequest(http.MethodGet, "/api/x", nil)
		req.RemoteAddr = remote
		if xff != "" {
			req.Header.Set("X-Forwarded-For", xff)
		}
		h.ServeHTTP(httptest.NewRecorder(), req)
		reqs := port.requests()
		return reqs[len(reqs)-1].SubjectDigest
	}
	client := digest("198.51.100.7:1", "")
	assert.Equal(t, client, digest("10.0.0.2:1", "6.6.6.6, 198.51.100.7"), "behind a trusted proxy the forwarded client counts")
	assert.NotEqual(t, client, digest("203.0.113.1:1", "198.51.100.7"), "an untrusted peer cannot claim another address")
	assert.Equal(t, digest("203.0.113.1:1", ""), digest("203.0.113.1:1", "198.51.100.7"), "an untrusted peer's XFF is ignored")
}

func TestIdentityErrors(t *testing.T) {
	port := &fakePort{out: decision(true, 10, 9, 0, time.Second)}
	var observed []Observation
	cfg := baseConfig(t, port, t0)
	cfg.Observer = ObserverFunc(func(o Observation) { observed = append(observed, o) })
	ip := cfg.Subjects
	// An identifier that fails as its request asks, with the raw value in
	// the error's text (which must not reach the response).
	cfg.Subjects = subject.IdentifierFunc(func(r *http.Request) (subject.Identity, error) {
		switch r.Header.Get("X-Test-Fail") {
		case "unknown-key":
			return subject.Identity{}, fmt.Errorf("%w: raw-secret-value", subject.ErrUnauthenticated)
		case "ambiguous":
			return subject.Identity{}, fmt.Errorf("%w: raw-secret-value", subject.ErrAPIKeyAmbiguous)
		}
		return ip.Identify(r)
	})
	m, err := New(cfg)
	require.NoError(t, err)
	var calls atomic.Int64
	h := m.Wrap(okHandler(&calls))

	for _, c := range []struct {
		name, remote, fail string
		status             int
	}{
		{name: "unknown key", remote: "192.0.2.1:1", fail: "unknown-key", status: 401},
		{name: "two keys", remote: "192.0.2.1:1", fail: "ambiguous", status: 400},
		{name: "no address", remote: "unix-socket", status: 500},
	} {
		req := httptest.NewRequest(http.MethodGet, "/api/x", nil)
		req.RemoteAddr = c.remote
		if c.fail != "" {
			req.Header.Set("X-Test-Fail", c.fail)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		assert.Equal(t, c.status, rec.Code, c.name)
		assert.Equal(t, "application/problem+json", rec.Header().Get("Content-Type"), c.name)
		if c.status == http.StatusUnauthorized {
			assert.Equal(t, subject.Challenge, rec.Header().Get("WWW-Authenticate"), c.name)
		} else {
			assert.Empty(t, rec.Header().Get("WWW-Authenticate"), c.name)
		}
		assert.Contains(t, rec.Body.String(), `"policy":"api"`, c.name)
		assert.NotContains(t, rec.Body.String(), "raw-secret-value", c.name)
		assert.NotContains(t, rec.Body.String(), c.remote, c.name)
	}
	assert.Empty(t, port.requests(), "the port is not asked without an identity")
	assert.Zero(t, calls.Load())
	require.Len(t, observed, 3)
	assert.Equal(t, 401, observed[0].Status)
	assert.Equal(t, 400, observed[1].Status)
	assert.Equal(t, 500, observed[2].Status)
}
