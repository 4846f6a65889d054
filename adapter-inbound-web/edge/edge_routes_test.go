package edge

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

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

// TestRateLimitPolicyOfAPlansPolicy (issue 36): a decision by another
// policy than the route's (the one the subject's plan maps it to) carries
// that policy's quota and window, under the route's policy name.
func TestRateLimitPolicyOfAPlansPolicy(t *testing.T) {
	free := mustPolicy(t, ratelimit.PolicySpec{ID: "api", Revision: 1, Algorithm: ratelimit.AlgorithmFixedWindow,
		Params: ratelimit.FixedWindow{Limit: 100, Window: time.Minute}, MaxCost: 1, CleanupGrace: time.Second,
		FailurePolicy: ratelimit.FailClosed})
	gold := mustPolicy(t, ratelimit.PolicySpec{ID: "api-gold", Revision: 1, Algorithm: ratelimit.AlgorithmFixedWindow,
		Params: ratelimit.FixedWindow{Limit: 5000, Window: time.Hour}, MaxCost: 1, CleanupGrace: time.Second,
		FailurePolicy: ratelimit.FailClosed})
	port := &fakePort{fn: func(r ratelimit.Request) ratelimit.Outcome {
		return ratelimit.Evaluated{Decision: ratelimit.Decision{Allowed: true, Limit: 5000, Remaining: 7, ResetAt: t0.Add(time.Second), PolicyID: "api-gold"}}
	}}
	cfg := baseConfig(t, port, t0)
	cfg.Policies = []ratelimit.Policy{free, gold}
	m, err := New(cfg)
	require.NoError(t, err)
	rec := httptest.NewRecorder()
	m.Wrap(http.NotFoundHandler()).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/any", nil))
	assert.Equal(t, `"api";q=5000;w=3600`, rec.Header().Get("RateLimit-Policy"))
}
