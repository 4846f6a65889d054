package health

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestConfigValidate(t *testing.T) {
	require.NoError(t, Config{}.Validate())
	require.NoError(t, Config{Timeout: MaxTimeout}.Validate())
	for _, d := range []time.Duration{-time.Nanosecond, MaxTimeout + 1} {
		err := Config{Timeout: d}.Validate()
		require.ErrorIs(t, err, ErrInvalidConfig)
		assert.Contains(t, err.Error(), "Timeout")
		_, err = New(Config{Timeout: d})
		require.ErrorIs(t, err, ErrInvalidConfig)
	}
}

func TestEndpoints(t *testing.T) {
	failing := CheckerFunc(func(context.Context) error { return errors.New("dial tcp 10.1.2.3:6379: secret-detail") })
	blocking := CheckerFunc(func(ctx context.Context) error {
		<-ctx.Done()
		return ctx.Err()
	})
	ready := CheckerFunc(func(ctx context.Context) error {
		if _, ok := ctx.Deadline(); !ok {
			return errors.New("no deadline")
		}
		return nil
	})
	tests := []struct {
		name    string
		checker ReadinessChecker
		drain   bool
		method  string
		path    string
		status  int
		detail  string // problem detail for 503
	}{
		{name: "healthz", path: "/healthz", status: 200},
		{name: "healthz head", method: http.MethodHead, path: "/healthz", status: 200},
		{name: "healthz with failing checker", checker: failing, path: "/healthz", status: 200},
		{name: "healthz while draining", drain: true, path: "/healthz", status: 200},
		{name: "readyz without checker", path: "/readyz", status: 200},
		{name: "readyz ready (checker sees a deadline)", checker: ready, path: "/readyz", status: 200},
		{name: "readyz failing", checker: failing, path: "/readyz", status: 503, detail: "readiness check failed"},
		{name: "readyz timed out", checker: blocking, path: "/readyz", status: 503, detail: "readiness check timed out"},
		{name: "readyz draining", checker: ready, drain: true, path: "/readyz", status: 503, detail: "shutting down"},
		{name: "post is not routed", method: http.MethodPost, path: "/readyz", status: 405},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var checks int
			h, err := New(Config{Checker: tt.checker, Timeout: 20 * time.Millisecond, OnCheck: func(error, time.Duration) { checks++ }})
			require.NoError(t, err)
			if tt.drain {
				h.Drain()
			}
			mux := http.NewServeMux()
			h.Register(mux)
			method := tt.method
			if method == "" {
				method = http.MethodGet
			}
			rec := httptest.NewRecorder()
			mux.ServeHTTP(rec, httptest.NewRequest(method, tt.path, nil))
			assert.Equal(t, tt.status, rec.Code)
			assert.NotContains(t, rec.Body.String(), "secret-detail")
			assert.NotContains(t, rec.Body.String(), "10.1.2.3")
			if tt.status == 503 {
				assert.Equal(t, "application/problem+json", rec.Header().Get("Content-Type"))
				assert.Equal(t, "1", rec.Header().Get("Retry-After"))
				var body map[string]any
				require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body))
				assert.Equal(t, map[string]any{"type": "about:blank", "title": "not ready", "status": float64(503), "detail": tt.detail}, body)
			}
			if tt.path == "/readyz" && tt.checker != nil && !tt.drain && tt.status != 405 {
				assert.Equal(t, 1, checks, "the checker runs once per probe")
			} else {
				assert.Zero(t, checks)
			}
		})
	}
}

// detailedError carries a public readiness detail beside private text.
type detailedError struct{}

func (detailedError) Error() string           { return "dial tcp 10.1.2.3:6379: secret-detail" }
func (detailedError) ReadinessDetail() string { return "circuit breaker open" }

// TestReadinessDetailer: an error implementing Detailer, even wrapped and
// joined, shows its ReadinessDetail and nothing else of its text.
func TestReadinessDetailer(t *testing.T) {
	err := errors.Join(errors.New("other: x"), fmt.Errorf("ratelimit: %w", detailedError{}))
	h, nerr := New(Config{Checker: CheckerFunc(func(context.Context) error { return err })})
	require.NoError(t, nerr)
	rec := httptest.NewRecorder()
	h.Readiness().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, ReadinessPath, nil))
	assert.Equal(t, http.StatusServiceUnavailable, rec.Code)
	var body map[string]any
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body))
	assert.Equal(t, "circuit breaker open", body["detail"])
	assert.NotContains(t, rec.Body.String(), "secret-detail")
}
