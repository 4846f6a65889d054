package wiring

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
)

// TestEnabledDedupIdempotencyKey: the service end to end on a real Redis,
// with a policy of capacity 3 (a token bucket refilling 1 per hour, so no
// window boundary resets the count mid-test) and "dedupWindow": a request repeated with the
// same Idempotency-Key is admitted with the recorded numbers and charged
// once; a malformed key is a 400 problem and charges nothing; a request
// without the header is charged as usual; /metrics counts the replays.
func TestEnabledDedupIdempotencyKey(t *testing.T) {
	rs := redistest.Start(t)
	file := filepath.Join(t.TempDir(), "policies.json")
	require.NoError(t, os.WriteFile(file, []byte(`{"policies":[{"id":"api","revision":1,"algorithm":"token_bucket","capacity":3,"refillTokens":1,"refillPeriod":"1h",
		"maxCost":1,"cleanupGrace":"1m","maxClockRegression":"2s","failurePolicy":"fail-closed","dedupWindow":"10m","routes":["GET /api/"]}]}`), 0o600))
	cfg := loadConfig(t, append(enabledKV(rs.Addr()), "APP_RATE_LIMIT_POLICIES_FILE", file)...)
	var srv *Server
	app := fxtest.New(t, Options(cfg, quietLogger()), fx.Populate(&srv))
	app.RequireStart()
	defer app.RequireStop()

	get := func(key ...string) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, "http://"+srv.Addr()+PathPing, nil)
		require.NoError(t, err)
		for _, k := range key {
			req.Header.Add("Idempotency-Key", k)
		}
		resp, err := httpClient().Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		require.NoError(t, err)
		return resp, string(b)
	}
	for range 3 {
		resp, body := get(`"order-42"`)
		require.Equal(t, http.StatusOK, resp.StatusCode, body)
		assert.Equal(t, "2", resp.Header.Get("RateLimit-Remaining"), "the recorded decision each time")
	}
	resp, body := get(`order-42`)
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode, body)
	assert.Contains(t, body, "invalid Idempotency-Key")
	assert.NotContains(t, body, "order-42")
	resp, body = get()
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	assert.Equal(t, "1", resp.Header.Get("RateLimit-Remaining"), "charged once for the three keyed requests, once now")
	resp, _ = get(`"order-43"`)
	assert.Equal(t, "0", resp.Header.Get("RateLimit-Remaining"))
	resp, _ = get(`"order-44"`)
	assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	resp, _ = get(`"order-42"`)
	assert.Equal(t, http.StatusOK, resp.StatusCode, "a recorded admission is replayed even when the limit is reached")

	_, body = do(t, http.MethodGet, "http://"+srv.Addr()+PathMetrics)
	assert.Contains(t, body, `tlb_ratelimit_dedup_total{policy="api",result="replayed"} 3`)
	assert.Contains(t, body, `tlb_ratelimit_dedup_retries_total{result="decided"} 0`)
	assert.Contains(t, body, `tlb_edge_responses_total{policy="api",result="400"} 1`)
	assert.False(t, strings.Contains(body, "order-4"), "no key in the metrics")
}
