package ratelimiter_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
	"github.com/tech-log/tech-log-backend/app-bootstrap/ratelimiter"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// TestWithShadow: a Limit.WithShadow policy is the policy file's
// "enforce": "shadow" (ADR 0037): beside an enforced policy on a route,
// Middleware decides it but only the enforced one refuses or writes
// fields; it cannot be the default policy; FromPolicy keeps it.
func TestWithShadow(t *testing.T) {
	assert.Equal(t, ratelimit.Shadow, ratelimiter.FixedWindow(2, time.Minute).WithShadow().Spec("next").Enforcement)
	assert.Zero(t, ratelimiter.FixedWindow(2, time.Minute).Spec("api").Enforcement, "absent: enforce")

	srv := redistest.Start(t)
	p := prefix(t)
	pol := ratelimiter.Policies{
		"api":  ratelimiter.FixedWindow(5, time.Minute).WithRoutes("GET /x"),
		"next": ratelimiter.FixedWindow(2, time.Minute).WithShadow().WithRoutes("GET /x"),
	}
	l := newLimiter(t, ratelimiter.Options{Addr: srv.Addr(), Secret: testSecret, KeyPrefix: p, Policies: pol, DefaultPolicy: "api"})
	next, ok := l.Config().RateLimit.Policies.Policy("next")
	require.True(t, ok)
	assert.True(t, next.Shadow())
	assert.Equal(t, ratelimit.Shadow, ratelimiter.FromPolicy(next).Spec("next").Enforcement, "FromPolicy keeps it")

	h := l.Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	for i := 1; i <= 6; i++ {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/x", nil))
		want := http.StatusOK
		if i == 6 {
			want = http.StatusTooManyRequests
		}
		require.Equal(t, want, rec.Code, "request %d: the enforced limit of 5 decides, the shadow limit of 2 never", i)
		assert.Equal(t, `"api";q=5;w=60`, rec.Header().Get("RateLimit-Policy"))
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := ratelimiter.New(ctx, ratelimiter.Options{Addr: srv.Addr(), Secret: testSecret, KeyPrefix: p, Policies: pol, DefaultPolicy: "next"})
	require.Error(t, err)
	assert.True(t, errors.Is(err, ratelimiter.ErrInvalidOptions), "%v", err)
	assert.Contains(t, err.Error(), `"next" is a shadow policy`)
}
