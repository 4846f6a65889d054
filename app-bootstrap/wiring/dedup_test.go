package wiring

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
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
// window boundary resets the count mid-test), "dedupWindow" and the
// default "dedupMaxReplays" (1): a request repeated with the same
// Idempotency-Key, bare or quoted (one key), is replayed once with the
// recorded numbers, then charged like a new request, and denied once the
// limit is spent; a malformed key is a 400 problem and charges nothing; a
// request without the header is charged as usual; /metrics counts the
// replays.
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
	resp, body := get(`"order-42"`)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	assert.Equal(t, "2", resp.Header.Get("RateLimit-Remaining"), "charged and recorded")
	resp, body = get(`order-42`)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	assert.Equal(t, "2", resp.Header.Get("RateLimit-Remaining"), "the bare form is the same key: the recorded decision")
	resp, body = get(`"order-42"`)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	assert.Equal(t, "1", resp.Header.Get("RateLimit-Remaining"), "the replay is spent: charged")
	resp, body = get(`order 42`)
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode, body)
	assert.Contains(t, body, "invalid Idempotency-Key")
	assert.NotContains(t, body, "order")
	resp, body = get()
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	assert.Equal(t, "0", resp.Header.Get("RateLimit-Remaining"), "charged twice for the three keyed requests, once now")
	resp, _ = get(`"order-43"`)
	assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	resp, _ = get(`"order-42"`)
	assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "a spent recorded admission is charged, and the limit is spent")
	resp, _ = get(`order-42`)
	assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode)

	_, body = do(t, http.MethodGet, "http://"+srv.Addr()+PathMetrics)
	assert.Contains(t, body, `tlb_ratelimit_dedup_total{policy="api",result="replayed"} 1`)
	assert.Contains(t, body, `tlb_ratelimit_dedup_retries_total{result="decided"} 0`)
	assert.Contains(t, body, `tlb_edge_responses_total{policy="api",result="400"} 1`)
	assert.False(t, strings.Contains(body, "order-4"), "no key in the metrics")
}

// TestEnabledDedupReplayBound: the service end to end on a real Redis, a
// limit of 5 (a token bucket refilling 1 per hour) with "dedupWindow" and
// "dedupMaxReplays" absent (1), 0 or 3; one Idempotency-Key sent 40 times,
// alternately bare and quoted. The handler is reached exactly 5 + n times:
// the first use (charged, recorded), n free replays of it, then 4 reuses
// charged like new requests; the other 35 - n are 429. That is the bound
// of docs/degraded-mode.md: limit x (1 + dedupMaxReplays).
func TestEnabledDedupReplayBound(t *testing.T) {
	for _, tt := range []struct {
		name  string
		field string
		n     int
	}{
		{"default", "", 1},
		{"no replays", `,"dedupMaxReplays":0`, 0},
		{"three replays", `,"dedupMaxReplays":3`, 3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "policies.json")
			require.NoError(t, os.WriteFile(file, []byte(`{"policies":[{"id":"api","revision":1,"algorithm":"token_bucket","capacity":5,"refillTokens":1,"refillPeriod":"1h",
				"maxCost":1,"cleanupGrace":"1m","maxClockRegression":"2s","failurePolicy":"fail-closed","dedupWindow":"10m"`+tt.field+`,"routes":["GET /api/"]}]}`), 0o600))
			rs := redistest.Start(t)
			cfg := loadConfig(t, append(enabledKV(rs.Addr()), "APP_RATE_LIMIT_POLICIES_FILE", file)...)
			var srv *Server
			app := fxtest.New(t, Options(cfg, quietLogger()), fx.Populate(&srv))
			app.RequireStart()
			defer app.RequireStop()

			var statuses, remaining []string
			admitted := 0
			for i := range 40 {
				key := `k-40-times`
				if i%2 == 1 {
					key = `"k-40-times"`
				}
				req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, "http://"+srv.Addr()+PathPing, nil)
				require.NoError(t, err)
				req.Header.Set("Idempotency-Key", key)
				resp, err := httpClient().Do(req)
				require.NoError(t, err)
				_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
				require.NoError(t, resp.Body.Close())
				statuses = append(statuses, strconv.Itoa(resp.StatusCode))
				remaining = append(remaining, resp.Header.Get("RateLimit-Remaining"))
				if resp.StatusCode == http.StatusOK {
					admitted++
				}
			}
			require.Equal(t, 5+tt.n, admitted, "handler reached limit x 1 + dedupMaxReplays times: %v", statuses)
			var wantStatus, wantRemaining []string
			for range 1 + tt.n { // the first use and its replays
				wantStatus, wantRemaining = append(wantStatus, "200"), append(wantRemaining, "4")
			}
			for _, r := range []string{"3", "2", "1", "0"} { // reuses charged
				wantStatus, wantRemaining = append(wantStatus, "200"), append(wantRemaining, r)
			}
			for range 35 - tt.n {
				wantStatus, wantRemaining = append(wantStatus, "429"), append(wantRemaining, "0")
			}
			assert.Equal(t, wantStatus, statuses)
			assert.Equal(t, wantRemaining, remaining)

			_, body := do(t, http.MethodGet, "http://"+srv.Addr()+PathMetrics)
			if tt.n > 0 {
				assert.Contains(t, body, `tlb_ratelimit_dedup_total{policy="api",result="replayed"} `+strconv.Itoa(tt.n)+"\n")
			} else {
				assert.NotContains(t, body, `tlb_ratelimit_dedup_total{policy="api",result="replayed"}`, "no replay")
			}
		})
	}
}
