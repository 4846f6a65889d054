package health

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type detailChecker struct {
	err    error
	detail any
}

func (d detailChecker) Ready(ctx context.Context) error { _, err := d.ReadyDetail(ctx); return err }
func (d detailChecker) ReadyDetail(context.Context) (any, error) {
	return d.detail, d.err
}

type shownErr struct{}

func (shownErr) Error() string           { return "down at 10.0.0.1:6379" }
func (shownErr) ReadinessDetail() string { return "dependency down" }

func TestReadinessDetail(t *testing.T) {
	deps := []map[string]any{{"name": "ratelimit", "ready": true}}
	get := func(c ReadinessChecker) (*httptest.ResponseRecorder, map[string]any) {
		h, err := New(Config{Checker: c})
		require.NoError(t, err)
		rec := httptest.NewRecorder()
		h.Readiness().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, ReadinessPath, nil))
		var body map[string]any
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body), rec.Body.String())
		return rec, body
	}

	rec, body := get(detailChecker{detail: deps})
	assert.Equal(t, http.StatusOK, rec.Code)
	assert.Equal(t, "application/json", rec.Header().Get("Content-Type"))
	assert.Equal(t, "no-store", rec.Header().Get("Cache-Control"))
	assert.Equal(t, true, body["ready"])
	assert.Equal(t, "ratelimit", body["dependencies"].([]any)[0].(map[string]any)["name"])

	rec, body = get(detailChecker{detail: deps, err: errors.New("down at 10.0.0.1:6379")})
	assert.Equal(t, http.StatusServiceUnavailable, rec.Code)
	assert.Equal(t, "application/problem+json", rec.Header().Get("Content-Type"))
	assert.Equal(t, "1", rec.Header().Get("Retry-After"))
	assert.Equal(t, "readiness check failed", body["detail"])
	assert.Equal(t, false, body["ready"])
	assert.NotNil(t, body["dependencies"])
	assert.NotContains(t, rec.Body.String(), "10.0.0.1", "the error text is never sent")

	rec, body = get(detailChecker{detail: deps, err: shownErr{}})
	assert.Equal(t, http.StatusServiceUnavailable, rec.Code)
	assert.Equal(t, "dependency down", body["detail"])
	assert.NotContains(t, rec.Body.String(), "10.0.0.1")

	rec, _ = get(detailChecker{detail: deps, err: context.DeadlineExceeded})
	assert.Equal(t, http.StatusServiceUnavailable, rec.Code)
	assert.Contains(t, rec.Body.String(), "readiness check timed out")
}

// TestReadinessSummary: the public /readyz runs the check but writes
// neither the dependencies nor a Detailer's text.
func TestReadinessSummary(t *testing.T) {
	deps := []map[string]any{{"name": "ratelimit", "ready": true, "server": map[string]any{"version": "7.4.1"}}}
	get := func(c ReadinessChecker) *httptest.ResponseRecorder {
		var checks int
		h, err := New(Config{Checker: c, OnCheck: func(error, time.Duration) { checks++ }})
		require.NoError(t, err)
		mux := http.NewServeMux()
		h.RegisterPublic(mux)
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, ReadinessPath, nil))
		assert.Equal(t, 1, checks, "the summary runs the check")
		return rec
	}
	rec := get(detailChecker{detail: deps})
	assert.Equal(t, http.StatusOK, rec.Code)
	assert.Equal(t, "ready\n", rec.Body.String())

	rec = get(detailChecker{detail: deps, err: shownErr{}})
	assert.Equal(t, http.StatusServiceUnavailable, rec.Code)
	assert.JSONEq(t, `{"type":"about:blank","title":"not ready","status":503,"detail":"not ready"}`, rec.Body.String())
	for _, leak := range []string{"7.4.1", "ratelimit", "dependency down", "10.0.0.1", "dependencies"} {
		assert.NotContains(t, rec.Body.String(), leak)
	}
}
