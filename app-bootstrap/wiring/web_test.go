package wiring

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-inbound-web/health"
	"github.com/tech-log/tech-log-backend/app-bootstrap/config"
	"github.com/tech-log/tech-log-backend/app-bootstrap/metrics"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit/ratelimittest"
)

// fakePort answers out and records the requests it saw.
func fakePort(out ratelimit.Outcome) *ratelimittest.Fake {
	return &ratelimittest.Fake{Outcome: out, UseOutcome: true}
}

func newTestHandler(t *testing.T, cfg config.Config, port ratelimit.EdgePort, checks ...ReadinessCheck) http.Handler {
	t.Helper()
	h, _ := newTestHandlerMetrics(t, cfg, port, checks...)
	return h
}

func newTestHandlerMetrics(t *testing.T, cfg config.Config, port ratelimit.EdgePort, checks ...ReadinessCheck) (http.Handler, *metrics.Metrics) {
	t.Helper()
	hh, err := newHealth(healthParams{Config: cfg, Logger: quietLogger(), Checks: checks})
	require.NoError(t, err)
	m := metrics.New()
	h, err := NewHandler(HandlerParams{Config: cfg, Logger: quietLogger(), Metrics: m, Health: hh, Edge: port})
	require.NoError(t, err)
	return h, m
}

func metricsText(t *testing.T, h http.Handler) string {
	t.Helper()
	rec := serve(h, http.MethodGet, PathMetrics)
	require.Equal(t, http.StatusOK, rec.Code)
	return rec.Body.String()
}

func serve(h http.Handler, method, target string, header ...string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, target, strings.NewReader(""))
	req.RemoteAddr = "192.0.2.10:5555"
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func decision(allowed bool, remaining int64, retry time.Duration) ratelimit.Outcome {
	return ratelimit.Evaluated{Decision: ratelimit.Decision{
		Allowed: allowed, Limit: 5, Remaining: remaining, RetryAfter: retry,
		ResetAt: time.Now().Add(30 * time.Second), PolicyID: "login", PolicyRevision: 3,
		Source: ratelimit.GlobalRedis, Certainty: ratelimit.Certain,
	}}
}

// TestWebOutcomes: each outcome kind becomes the status and fields of
// docs/http.md ("Status codes") through the wired handler.
func TestWebOutcomes(t *testing.T) {
	cfg := loadConfig(t, enabledKV("127.0.0.1:1")...)
	tests := []struct {
		name        string
		out         ratelimit.Outcome
		status      int
		retryAfter  string
		contentType string
		body        string
	}{
		{"allowed", decision(true, 4, 0), http.StatusOK, "", "application/json", `"status":"example login accepted"`},
		{"denied", decision(false, 0, 1500*time.Millisecond), http.StatusTooManyRequests, "2", "", ""},
		{"unavailable", ratelimit.Unavailable{PolicyID: "login", RetryAfter: time.Second, Category: ratelimit.CategoryConnection}, http.StatusServiceUnavailable, "1", "application/problem+json", `"category":"connection"`},
		{"indeterminate", ratelimit.Indeterminate{PolicyID: "login", RetryAfter: time.Second, Category: ratelimit.CategoryTimeout}, http.StatusServiceUnavailable, "1", "application/problem+json", `"outcome":"indeterminate"`},
		{"incompatible", ratelimit.Incompatible{PolicyID: "login", Category: ratelimit.CategoryMalformedReply}, http.StatusServiceUnavailable, "", "application/problem+json", `"category":"malformed_reply"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			port := fakePort(tt.out)
			h := newTestHandler(t, cfg, port)
			rec := serve(h, http.MethodPost, PathLogin, "X-API-Key", "raw-api-key-value")
			assert.Equal(t, tt.status, rec.Code, rec.Body.String())
			if tt.retryAfter != "" {
				assert.Equal(t, tt.retryAfter, rec.Header().Get("Retry-After"))
			} else if tt.status == http.StatusServiceUnavailable {
				assert.NotEmpty(t, rec.Header().Get("Retry-After"))
			}
			if tt.contentType != "" {
				assert.Equal(t, tt.contentType, rec.Header().Get("Content-Type"))
			}
			assert.Contains(t, rec.Body.String(), tt.body)
			if _, ok := tt.out.(ratelimit.Evaluated); ok {
				assert.Equal(t, "5", rec.Header().Get("RateLimit-Limit"))
				assert.NotEmpty(t, rec.Header().Get("RateLimit-Reset"))
				assert.Contains(t, rec.Header().Get("RateLimit-Policy"), "login")
			}
			assert.NotContains(t, rec.Body.String(), "raw-api-key-value")
			reqs := port.Requests()
			require.Len(t, reqs, 1)
			assert.Equal(t, ratelimit.PolicyID("login"), reqs[0].PolicyID, "POST /api/v1/login maps to the login policy")
			assert.NotContains(t, string(reqs[0].SubjectDigest), "raw-api-key-value", "the port sees a digest only")
			assert.False(t, reqs[0].Deadline.IsZero())
		})
	}
}

func TestWebRoutesAndExemptions(t *testing.T) {
	cfg := loadConfig(t, enabledKV("127.0.0.1:1")...)
	port := fakePort(decision(true, 4, 0))
	h := newTestHandler(t, cfg, port)

	assert.Equal(t, http.StatusOK, serve(h, http.MethodGet, PathPing).Code)
	assert.Equal(t, http.StatusNotFound, serve(h, http.MethodGet, "/api/v2/unknown").Code, "unmatched API route: limited by the default policy, then 404")
	for _, p := range []string{PathHealthz, PathReadyz, PathMetrics} {
		assert.Equal(t, http.StatusOK, serve(h, http.MethodGet, p).Code, p)
	}
	reqs := port.Requests()
	require.Len(t, reqs, 2, "health, readiness and metrics are not rate-limited")
	assert.Equal(t, ratelimit.PolicyID("api"), reqs[0].PolicyID)
	assert.Equal(t, ratelimit.PolicyID("api"), reqs[1].PolicyID, "default policy")
}

// TestWebLocalLimiterRunsFirst: with both limiters on, a client over its
// local budget is refused without an EdgePort call.
func TestWebLocalLimiterRunsFirst(t *testing.T) {
	kv := append(enabledKV("127.0.0.1:1"), "APP_WEB_LOCAL_LIMIT_ENABLED", "true", "APP_WEB_LOCAL_LIMIT_BURST", "2", "APP_WEB_LOCAL_LIMIT_RATE", "0.1", "APP_WEB_LOCAL_LIMIT_IDLE_TTL", "1m")
	cfg := loadConfig(t, kv...)
	port := fakePort(decision(true, 4, 0))
	h := newTestHandler(t, cfg, port)
	codes := []int{}
	for range 4 {
		codes = append(codes, serve(h, http.MethodGet, PathPing).Code)
	}
	assert.Equal(t, []int{200, 200, 429, 429}, codes)
	assert.Len(t, port.Requests(), 2, "locally refused requests never reach the port")
	text := metricsText(t, h)
	assert.Contains(t, text, `tlb_local_limit_responses_total{status="429"} 2`)
	assert.Contains(t, text, `tlb_edge_responses_total{policy="api",result="admitted"} 2`)
}

func TestWebEdgeResponsesCounted(t *testing.T) {
	cfg := loadConfig(t, enabledKV("127.0.0.1:1")...)
	port := fakePort(decision(false, 0, time.Second))
	h := newTestHandler(t, cfg, port)
	serve(h, http.MethodPost, PathLogin)
	serve(h, http.MethodPost, PathLogin, "X-API-Key", strings.Repeat("k", 300)) // an unverified key is ignored: the IP's 429
	port.Outcome = ratelimit.Unavailable{PolicyID: "login", RetryAfter: time.Second, Category: ratelimit.CategoryAdmission}
	serve(h, http.MethodPost, PathLogin)
	text := metricsText(t, h)
	assert.Contains(t, text, `tlb_edge_responses_total{policy="login",result="429"} 2`)
	assert.Contains(t, text, `tlb_edge_responses_total{policy="login",result="503"} 1`)
	assert.NotContains(t, text, "tlb_local_limit_responses_total{", "the local limiter is off")
}

func TestWebDisabledHasNoEdge(t *testing.T) {
	cfg := loadConfig(t, "APP_WEB_LOCAL_LIMIT_ENABLED", "false")
	h := newTestHandler(t, cfg, nil)
	rec := serve(h, http.MethodGet, PathPing)
	assert.Equal(t, http.StatusOK, rec.Code)
	assert.Empty(t, rec.Header().Get("RateLimit-Limit"))
}

func TestWebTrustedProxies(t *testing.T) {
	kv := append(enabledKV("127.0.0.1:1"), "APP_WEB_TRUSTED_PROXIES", "192.0.2.0/24")
	cfg := loadConfig(t, kv...)
	port := fakePort(decision(true, 4, 0))
	h := newTestHandler(t, cfg, port)
	serve(h, http.MethodGet, PathPing, "X-Forwarded-For", "198.51.100.7")
	serve(h, http.MethodGet, PathPing, "X-Forwarded-For", "198.51.100.8")
	reqs := port.Requests()
	require.Len(t, reqs, 2)
	assert.NotEqual(t, reqs[0].SubjectDigest, reqs[1].SubjectDigest, "behind a trusted proxy the forwarded client is the subject")

	untrusted := loadConfig(t, enabledKV("127.0.0.1:1")...)
	port2 := fakePort(decision(true, 4, 0))
	h2 := newTestHandler(t, untrusted, port2)
	serve(h2, http.MethodGet, PathPing, "X-Forwarded-For", "198.51.100.7")
	serve(h2, http.MethodGet, PathPing, "X-Forwarded-For", "198.51.100.8")
	reqs = port2.Requests()
	require.Len(t, reqs, 2)
	assert.Equal(t, reqs[0].SubjectDigest, reqs[1].SubjectDigest, "X-Forwarded-For is ignored by default")
}

// TestWebRotatingAPIKeyIsOneClient: by default an unverified X-API-Key is
// no identity: requests from one address with a fresh key each are one
// subject for the edge and one bucket for the local limiter.
func TestWebRotatingAPIKeyIsOneClient(t *testing.T) {
	kv := append(enabledKV("127.0.0.1:1"), "APP_WEB_LOCAL_LIMIT_ENABLED", "true", "APP_WEB_LOCAL_LIMIT_BURST", "3", "APP_WEB_LOCAL_LIMIT_RATE", "0.01", "APP_WEB_LOCAL_LIMIT_IDLE_TTL", "10m")
	cfg := loadConfig(t, kv...)
	port := fakePort(decision(true, 4, 0))
	h := newTestHandler(t, cfg, port)
	codes := []int{}
	for i := range 6 {
		codes = append(codes, serve(h, http.MethodGet, PathPing, "X-API-Key", fmt.Sprintf("rotating-key-%d", i)).Code)
	}
	assert.Equal(t, []int{200, 200, 200, 429, 429, 429}, codes, "the local limiter keys by IP, whatever the header says")
	reqs := port.Requests()
	require.Len(t, reqs, 3)
	for _, r := range reqs[1:] {
		assert.Equal(t, reqs[0].SubjectDigest, r.SubjectDigest, "the edge's subject is the IP, not the header")
	}
}

func TestWebReadiness(t *testing.T) {
	cfg := loadConfig(t)
	var fail bool
	check := ReadinessCheck{Name: "dep", Check: func(context.Context) error {
		if fail {
			return errors.New("dependency down at 10.0.0.1:6379")
		}
		return nil
	}}
	h := newTestHandler(t, cfg, nil, check)
	assert.Equal(t, http.StatusOK, serve(h, http.MethodGet, PathReadyz).Code)
	fail = true
	rec := serve(h, http.MethodGet, PathReadyz)
	assert.Equal(t, http.StatusServiceUnavailable, rec.Code)
	assert.NotContains(t, rec.Body.String(), "10.0.0.1", "the cause is logged, never sent")
	assert.Equal(t, http.StatusOK, serve(h, http.MethodGet, PathHealthz).Code)
}

func TestReadyTimeout(t *testing.T) {
	assert.Equal(t, 2*time.Second, readyTimeout(loadConfig(t)))
	cfg := loadConfig(t, append(enabledKV("127.0.0.1:1"), "APP_RATE_LIMIT_COMMAND_TIMEOUT", "1s", "APP_RATE_LIMIT_DIAL_TIMEOUT", "1s", "APP_RATE_LIMIT_POOL_TIMEOUT", "1s", "APP_WEB_EVALUATION_TIMEOUT", "2s")...)
	assert.Equal(t, 6*time.Second, readyTimeout(cfg))
	assert.LessOrEqual(t, readyTimeout(cfg), health.MaxTimeout)
}

// TestQueueDelayFitsTheWriteTimeout: the longest a leaky-bucket policy may
// hold a request (config.MaxQueueDelay) leaves the handler time within the
// HTTP server's write timeout (ADR 0028).
func TestQueueDelayFitsTheWriteTimeout(t *testing.T) {
	require.Less(t, config.MaxQueueDelay, writeTimeout)
}
