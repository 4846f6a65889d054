package edge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"sync"
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

func TestCostFunc(t *testing.T) {
	port := &fakePort{out: decision(true, 10, 9, 0, time.Second)}
	cfg := baseConfig(t, port, t0)
	cfg.Routes = []Route{{Pattern: "POST /api/v1/upload", Policy: "upload"}}
	cfg.Cost = func(r *http.Request, p ratelimit.PolicyID) int64 {
		if p == "upload" {
			return 5
		}
		return 1
	}
	m, err := New(cfg)
	require.NoError(t, err)
	h := m.Wrap(http.NotFoundHandler())
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/api/v1/upload", nil))
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/api/v1/ping", nil))
	reqs := port.requests()
	require.Len(t, reqs, 2)
	assert.Equal(t, int64(5), reqs[0].Cost)
	assert.Equal(t, ratelimit.PolicyID("upload"), reqs[0].PolicyID)
	assert.Equal(t, int64(1), reqs[1].Cost)
}

func TestRoutePolicyMapping(t *testing.T) {
	port := &fakePort{out: decision(true, 10, 9, 0, time.Second)}
	cfg := baseConfig(t, port, t0)
	cfg.Routes = []Route{
		{Pattern: "GET /api/", Policy: "api-read"},
		{Pattern: "POST /api/v1/login", Policy: "login"},
		{Pattern: "/v2/login", Policy: "login-any"},
		{Pattern: "GET /api/v1/files/{id}", Policy: "files"},
		{Pattern: "GET /api/v1/files/{id}/raw", Policy: "files-raw"},
		{Pattern: "GET /api/v1/exact/{$}", Policy: "exact"},
		{Pattern: "admin.example.com/api/", Policy: "admin"},
	}
	cfg.Exempt = []string{"GET /healthz", "GET /api/v1/public/"}
	m, err := New(cfg)
	require.NoError(t, err)

	tests := []struct {
		method, target, host string
		policy               ratelimit.PolicyID
		limited              bool
	}{
		{method: "POST", target: "/api/v1/login", policy: "login", limited: true},
		{method: "PUT", target: "/v2/login", policy: "login-any", limited: true},     // method-less pattern
		{method: "GET", target: "/api/v1/login", policy: "api-read", limited: true},  // POST route does not apply to GET
		{method: "PUT", target: "/api/v1/login", policy: "api", limited: true},       // neither route's method: default
		{method: "HEAD", target: "/api/v1/other", policy: "api-read", limited: true}, // GET patterns match HEAD
		{method: "GET", target: "/api/v1/files/42", policy: "files", limited: true},  // more specific than GET /api/
		{method: "GET", target: "/api/v1/files/42/raw", policy: "files-raw", limited: true},
		{method: "GET", target: "/api/v1/exact/", policy: "exact", limited: true},
		{method: "GET", target: "/api/v1/exact/more", policy: "api-read", limited: true}, // {$} does not match longer paths
		{method: "DELETE", target: "/api/v1/other", policy: "api", limited: true},        // no route: default
		{method: "GET", target: "/elsewhere", policy: "api", limited: true},              // no route: default
		{method: "GET", target: "/api", policy: "api", limited: true},                    // ServeMux would redirect: default
		{method: "GET", target: "/api/v1/../v1/x", policy: "api", limited: true},         // unclean path, redirect: default
		{method: "GET", target: "/api/x", host: "admin.example.com", policy: "admin", limited: true},
		{method: "GET", target: "/api/x", host: "admin.example.com:8443", policy: "admin", limited: true},
		{method: "GET", target: "/healthz", limited: false},
		{method: "GET", target: "/api/v1/public/doc", limited: false}, // exempt prefix beats GET /api/
		{method: "POST", target: "/healthz", policy: "api", limited: true},
	}
	for _, tt := range tests {
		req := httptest.NewRequest(tt.method, tt.target, nil)
		if tt.host != "" {
			req.Host = tt.host
		}
		got, limited := m.policyFor(req)
		name := tt.method + " " + tt.host + tt.target
		assert.Equal(t, tt.limited, limited, name)
		if tt.limited {
			assert.Equal(t, tt.policy, got, name)
		}

		before := len(port.requests())
		var calls atomic.Int64
		m.Wrap(okHandler(&calls)).ServeHTTP(httptest.NewRecorder(), req)
		reqs := port.requests()
		if tt.limited {
			require.Len(t, reqs, before+1, name)
			assert.Equal(t, tt.policy, reqs[len(reqs)-1].PolicyID, name)
		} else {
			assert.Len(t, reqs, before, "exempt requests skip the port: %s", name)
		}
		assert.Equal(t, int64(1), calls.Load(), name)
	}
}

func TestRateLimitPolicyWindow(t *testing.T) {
	fixed := mustPolicy(t, ratelimit.PolicySpec{ID: "api", Revision: 1, Algorithm: ratelimit.AlgorithmFixedWindow,
		Params: ratelimit.FixedWindow{Limit: 100, Window: time.Minute}, MaxCost: 1, CleanupGrace: time.Second,
		FailurePolicy: ratelimit.FailClosed})
	sliding := mustPolicy(t, ratelimit.PolicySpec{ID: "slide", Revision: 1, Algorithm: ratelimit.AlgorithmSlidingWindowCounter,
		Params: ratelimit.SlidingWindowCounter{Limit: 10, Window: 1500 * time.Millisecond}, MaxCost: 1, CleanupGrace: time.Second,
		FailurePolicy: ratelimit.FailClosed})
	bucket := mustPolicy(t, ratelimit.PolicySpec{ID: "bucket", Revision: 1, Algorithm: ratelimit.AlgorithmTokenBucket,
		Params: ratelimit.TokenBucket{Capacity: 100, RefillTokens: 10, RefillPeriod: time.Second}, MaxCost: 1, CleanupGrace: time.Second,
		FailurePolicy: ratelimit.FailClosed})
	port := &fakePort{fn: func(r ratelimit.Request) ratelimit.Outcome {
		return ratelimit.Evaluated{Decision: ratelimit.Decision{Allowed: true, Limit: 100, Remaining: 1, ResetAt: t0.Add(time.Second), PolicyID: r.PolicyID}}
	}}
	cfg := baseConfig(t, port, t0)
	cfg.Policies = []ratelimit.Policy{fixed, sliding, bucket}
	cfg.Routes = []Route{{Pattern: "/slide", Policy: "slide"}, {Pattern: "/bucket", Policy: "bucket"}}
	m, err := New(cfg)
	require.NoError(t, err)
	h := m.Wrap(http.NotFoundHandler())
	for target, want := range map[string]string{
		"/other":  `"api";q=100;w=60`,
		"/slide":  `"slide";q=100;w=2`,
		"/bucket": `"bucket";q=100;w=10`, // 100 tokens at 10 per second: 10s from empty to full
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, target, nil))
		assert.Equal(t, want, rec.Header().Get("RateLimit-Policy"), target)
	}
}

func TestConfigValidate(t *testing.T) {
	fixed := mustPolicy(t, ratelimit.PolicySpec{ID: "api", Revision: 1, Algorithm: ratelimit.AlgorithmFixedWindow,
		Params: ratelimit.FixedWindow{Limit: 100, Window: time.Minute}, MaxCost: 1, CleanupGrace: time.Second,
		FailurePolicy: ratelimit.FailClosed})
	tests := []struct {
		name   string
		mutate func(*Config)
		field  string
	}{
		{name: "valid", mutate: func(*Config) {}},
		{name: "no port", mutate: func(c *Config) { c.Port = nil }, field: "Port"},
		{name: "no subjects", mutate: func(c *Config) { c.Subjects = nil }, field: "Subjects"},
		{name: "no pseudonymizer", mutate: func(c *Config) { c.Pseudonymizer = nil }, field: "Pseudonymizer"},
		{name: "no default policy", mutate: func(c *Config) { c.DefaultPolicy = "" }, field: "DefaultPolicy"},
		{name: "bad default policy", mutate: func(c *Config) { c.DefaultPolicy = "Not Valid" }, field: "DefaultPolicy"},
		{name: "bad route policy", mutate: func(c *Config) { c.Routes = []Route{{Pattern: "/a", Policy: "UPPER"}} }, field: "Routes[0].Policy"},
		{name: "empty route pattern", mutate: func(c *Config) { c.Routes = []Route{{Pattern: "", Policy: "api"}} }, field: "Routes[0].Pattern"},
		{name: "invalid route pattern", mutate: func(c *Config) { c.Routes = []Route{{Pattern: "GET api", Policy: "api"}} }, field: "Routes[0].Pattern"},
		{name: "duplicate patterns", mutate: func(c *Config) {
			c.Routes = []Route{{Pattern: "GET /a", Policy: "api"}, {Pattern: "GET /a", Policy: "api"}}
		}, field: "Routes[1].Pattern"},
		{name: "conflicting patterns", mutate: func(c *Config) {
			c.Routes = []Route{{Pattern: "GET /a/{x}", Policy: "api"}, {Pattern: "GET /{y}/b", Policy: "api"}}
		}, field: "Routes[1].Pattern"},
		{name: "exempt duplicates a route", mutate: func(c *Config) {
			c.Routes = []Route{{Pattern: "GET /healthz", Policy: "api"}}
			c.Exempt = []string{"GET /healthz"}
		}, field: "Exempt[0]"},
		{name: "empty exempt", mutate: func(c *Config) { c.Exempt = []string{""} }, field: "Exempt[0]"},
		{name: "zero timeout", mutate: func(c *Config) { c.Timeout = 0 }, field: "Timeout"},
		{name: "huge timeout", mutate: func(c *Config) { c.Timeout = MaxTimeout + 1 }, field: "Timeout"},
		{name: "zero policy", mutate: func(c *Config) { c.Policies = []ratelimit.Policy{{}} }, field: "Policies[0]"},
		{name: "duplicate policy", mutate: func(c *Config) { c.Policies = []ratelimit.Policy{fixed, fixed} }, field: "Policies[1]"},
		{name: "route policy not among policies", mutate: func(c *Config) {
			c.Policies = []ratelimit.Policy{fixed}
			c.Routes = []Route{{Pattern: "/x", Policy: "other"}}
		}, field: "Routes[0].Policy"},
		{name: "default policy not among policies", mutate: func(c *Config) {
			c.Policies = []ratelimit.Policy{fixed}
			c.DefaultPolicy = "other"
		}, field: "DefaultPolicy"},
		{name: "too many patterns", mutate: func(c *Config) { c.Exempt = make([]string, MaxRoutes+1) }, field: "max"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := baseConfig(t, &fakePort{}, t0)
			tt.mutate(&cfg)
			m, err := New(cfg)
			if tt.field == "" {
				require.NoError(t, err)
				require.NotNil(t, m)
				return
			}
			require.ErrorIs(t, err, ErrInvalidConfig)
			assert.Contains(t, err.Error(), tt.field)
			assert.Nil(t, m)
		})
	}
	assert.Panics(t, func() {
		m, err := New(baseConfig(t, &fakePort{}, t0))
		require.NoError(t, err)
		m.Wrap(nil)
	})
}

func TestConcurrentRequests(t *testing.T) {
	var n atomic.Int64
	port := &fakePort{fn: func(ratelimit.Request) ratelimit.Outcome {
		if n.Add(1)%2 == 0 {
			return decision(false, 10, 0, time.Second, time.Second)
		}
		return decision(true, 10, 1, 0, time.Second)
	}}
	cfg := baseConfig(t, port, t0)
	cfg.Routes = []Route{{Pattern: "POST /api/v1/login", Policy: "login"}}
	m, err := New(cfg)
	require.NoError(t, err)
	var calls atomic.Int64
	h := m.Wrap(okHandler(&calls))
	var wg sync.WaitGroup
	var denied atomic.Int64
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				method := http.MethodGet
				if (g+i)%3 == 0 {
					method = http.MethodPost
				}
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest(method, "/api/v1/login", nil))
				if rec.Code == 429 {
					denied.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, int64(400), calls.Load()+denied.Load())
	assert.Equal(t, int64(200), denied.Load())
}

func TestEndToEndServer(t *testing.T) {
	port := &fakePort{out: ratelimit.Indeterminate{PolicyID: "api", RetryAfter: 2500 * time.Millisecond, Category: ratelimit.CategoryTimeout}}
	cfg := baseConfig(t, port, t0)
	cfg.Now = nil // real clock: the deadline must lie in the future
	m, err := New(cfg)
	require.NoError(t, err)
	srv := httptest.NewServer(m.Wrap(http.NotFoundHandler()))
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL + "/api/v1/ping")
	require.NoError(t, err)
	defer resp.Body.Close()
	assert.Equal(t, 503, resp.StatusCode)
	assert.Equal(t, "3", resp.Header.Get("Retry-After"))
	var body map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
	assert.Equal(t, map[string]any{"type": "about:blank", "title": "rate limiter unavailable", "status": float64(503),
		"outcome": "indeterminate", "category": "timeout", "policy": "api"}, body)
	reqs := port.requests()
	require.Len(t, reqs, 1)
	assert.True(t, reqs[0].Deadline.After(time.Now().Add(-time.Minute)), "deadline is derived from the real clock")
}

// TestResetFromTheServerClock: the time to reset is the decision's own
// ResetAt - ServerNow; a skew between this host's clock and the
// coordination server's does not shift RateLimit-Reset or t (issue 15).
func TestResetFromTheServerClock(t *testing.T) {
	for _, skew := range []time.Duration{0, -time.Hour, time.Hour, 1500 * time.Millisecond, -1500 * time.Millisecond} {
		server := t0.Add(skew) // the server's clock when the app's reads t0
		port := &fakePort{out: ratelimit.Evaluated{Decision: ratelimit.Decision{
			Allowed: true, Limit: 10, Remaining: 4, ResetAt: server.Add(29500 * time.Millisecond), ServerNow: server,
			PolicyID: "api", PolicyRevision: 1, Source: ratelimit.GlobalRedis, Certainty: ratelimit.Certain,
		}}}
		m, err := New(baseConfig(t, port, t0))
		require.NoError(t, err)
		rec := httptest.NewRecorder()
		m.Wrap(http.NotFoundHandler()).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/x", nil))
		assert.Equal(t, "30", rec.Header().Get("RateLimit-Reset"), "skew %v", skew)
		assert.Equal(t, `"api";r=4;t=30`, rec.Header().Get("RateLimit"), "skew %v", skew)
	}

	// A reset at or before the server's now is t=0, never negative.
	port := &fakePort{out: ratelimit.Evaluated{Decision: ratelimit.Decision{
		Allowed: true, Limit: 10, Remaining: 10, ResetAt: t0.Add(-time.Second), ServerNow: t0,
		PolicyID: "api", PolicyRevision: 1, Source: ratelimit.GlobalRedis, Certainty: ratelimit.Certain,
	}}}
	m, err := New(baseConfig(t, port, t0.Add(-time.Hour)))
	require.NoError(t, err)
	rec := httptest.NewRecorder()
	m.Wrap(http.NotFoundHandler()).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/x", nil))
	assert.Equal(t, `"api";r=10;t=0`, rec.Header().Get("RateLimit"))
	assert.Equal(t, "0", rec.Header().Get("RateLimit-Reset"))
}

// TestFieldsFollowTheDecision: for decisions across the value ranges, the
// fields parse as the draft's structured fields and carry the decision's
// numbers: q = limit, r = remaining clamped to 0..q, t = the reset rounded
// up, never negative; the legacy fields agree; OmitLegacyFields drops them.
func TestFieldsFollowTheDecision(t *testing.T) {
	rateLimitRE := regexp.MustCompile(`^"api";r=(0|[1-9][0-9]{0,14});t=(0|[1-9][0-9]{0,14})$`)
	policyRE := regexp.MustCompile(`^"api";q=(0|[1-9][0-9]{0,14})$`)
	rng := rand.New(rand.NewPCG(16, 15))
	for _, legacy := range []bool{true, false} {
		var d ratelimit.Decision
		port := &fakePort{fn: func(ratelimit.Request) ratelimit.Outcome { return ratelimit.Evaluated{Decision: d} }}
		cfg := baseConfig(t, port, t0)
		cfg.OmitLegacyFields = !legacy
		m, err := New(cfg)
		require.NoError(t, err)
		h := m.Wrap(http.NotFoundHandler())
		for i := range 500 {
			limit := rng.Int64N(1_000_000)
			remaining := rng.Int64N(limit+3) - 1 // -1..limit+1: out-of-range values are clamped
			reset := time.Duration(rng.Int64N(int64(2*time.Hour))) - time.Minute
			d = ratelimit.Decision{Allowed: rng.IntN(2) == 0, Limit: limit, Remaining: remaining, RetryAfter: time.Second,
				ServerNow: t0.Add(time.Duration(rng.Int64N(int64(time.Hour)))), PolicyID: "api", PolicyRevision: 1,
				Source: ratelimit.GlobalRedis, Certainty: ratelimit.Certain}
			d.ResetAt = d.ServerNow.Add(reset)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/x", nil))
			rl := rateLimitRE.FindStringSubmatch(rec.Header().Get("RateLimit"))
			require.NotNil(t, rl, "case %d: RateLimit %q", i, rec.Header().Get("RateLimit"))
			pol := policyRE.FindStringSubmatch(rec.Header().Get("RateLimit-Policy"))
			require.NotNil(t, pol, "case %d: RateLimit-Policy %q", i, rec.Header().Get("RateLimit-Policy"))
			wantR := min(max(remaining, 0), limit)
			wantT := int64(0)
			if reset > 0 {
				wantT = int64((reset + time.Second - 1) / time.Second)
			}
			assert.Equal(t, strconv.FormatInt(limit, 10), pol[1], "case %d: q", i)
			assert.Equal(t, strconv.FormatInt(wantR, 10), rl[1], "case %d: r", i)
			assert.Equal(t, strconv.FormatInt(wantT, 10), rl[2], "case %d: t", i)
			if legacy {
				assert.Equal(t, pol[1], rec.Header().Get("RateLimit-Limit"))
				assert.Equal(t, rl[1], rec.Header().Get("RateLimit-Remaining"))
				assert.Equal(t, rl[2], rec.Header().Get("RateLimit-Reset"))
			} else {
				for _, f := range []string{"RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset"} {
					assert.Empty(t, rec.Header().Values(f), "case %d: %s is off", i, f)
				}
			}
		}
	}
}
