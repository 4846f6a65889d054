package main_test

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
)

// queueE2EPolicies: GET /api/v1/ping is the queue (ADR 0028): 10
// per second, 20 waiting, every waiter delayed. GET /api/v1/slow (no such
// page: admitted requests are answered 404 by the API) is a queue slow
// enough that no slot frees by itself while a test step runs: one per 10 s,
// 2 waiting.
const queueE2EPolicies = `{"policies": [
  {"id": "queue", "revision": 1, "algorithm": "leaky_bucket",
   "rate": 10, "period": "1s", "queueSize": 20, "delayAfter": 0,
   "maxCost": 1, "cleanupGrace": "1m", "maxClockRegression": "2s",
   "failurePolicy": "fail-closed", "routes": ["GET /api/v1/ping"]},
  {"id": "slow", "revision": 1, "algorithm": "leaky_bucket",
   "rate": 1, "period": "10s", "queueSize": 2,
   "maxCost": 1, "cleanupGrace": "1m", "maxClockRegression": "2s",
   "failurePolicy": "fail-closed", "routes": ["GET /api/v1/slow"]}
]}`

func startQueueInstances(t *testing.T) (a, b *instance) {
	t.Helper()
	rs := redistest.Start(t)
	policies := filepath.Join(t.TempDir(), "queue-policies.json")
	require.NoError(t, os.WriteFile(policies, []byte(queueE2EPolicies), 0o600))
	env := append(enabledEnv(t, rs.Addr()), "APP_RATE_LIMIT_POLICIES_FILE="+policies, "APP_RATE_LIMIT_DEFAULT_POLICY=queue")
	return startInstance(t, env), startInstance(t, env)
}

type queued struct {
	sent, arrived time.Time
	status        int
	delay         time.Duration // the response's RateLimit-Delay
	retryAfter    string
}

// TestE2ELeakyQueueSlots: 100 requests of one client sent at once to two
// instances of one queue (10/s, queueSize 20, delayAfter 0). What must
// hold: at least 21 are admitted (the queue fills), and at most one more
// per 100 ms the decisions took (a slot frees every 100 ms); the i-th
// admitted response arrives no sooner than i slots (100 ms each) after the
// first request was sent, and no delay exceeds the queue's longest (2 s);
// every other request is a 429 with Retry-After.
func TestE2ELeakyQueueSlots(t *testing.T) {
	a, b := startQueueInstances(t)
	const n = 100
	results := make([]queued, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		in := a
		if i%2 == 1 {
			in = b
		}
		wg.Go(func() {
			req, err := http.NewRequest(http.MethodGet, in.url("/api/v1/ping"), nil)
			if err != nil {
				return
			}
			req.Header.Set("X-Forwarded-For", "198.51.100.70")
			<-start
			r := queued{sent: time.Now()}
			resp, err := client.Do(req)
			r.arrived = time.Now()
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
				r.status, r.retryAfter = resp.StatusCode, resp.Header.Get("Retry-After")
				if ms, err := strconv.ParseInt(resp.Header.Get("RateLimit-Delay"), 10, 64); err == nil {
					r.delay = time.Duration(ms) * time.Millisecond
				}
			}
			results[i] = r
		})
	}
	close(start)
	wg.Wait()

	firstSent := results[0].sent
	var admitted []queued
	lastDecision := firstSent
	for i, r := range results {
		if r.sent.Before(firstSent) {
			firstSent = r.sent
		}
		// A response leaves at least its delay after its decision.
		if d := r.arrived.Add(-r.delay); d.After(lastDecision) {
			lastDecision = d
		}
		switch r.status {
		case http.StatusOK:
			admitted = append(admitted, r)
		case http.StatusTooManyRequests:
			assert.NotEmpty(t, r.retryAfter, "request %d: a denial says when to retry", i)
			assert.Zero(t, r.delay, "request %d: a denial is not held", i)
		default:
			require.Failf(t, "unexpected status", "request %d: %d\n%s\n%s", i, r.status, a.logs(), b.logs())
		}
	}
	freed := int(lastDecision.Sub(firstSent)/(100*time.Millisecond)) + 1
	require.GreaterOrEqual(t, len(admitted), 21, "the queue fills: one at once and 20 waiting")
	require.LessOrEqual(t, len(admitted), 21+freed, "at most one more per 100 ms the decisions took (%v)", lastDecision.Sub(firstSent))
	slices.SortFunc(admitted, func(x, y queued) int { return x.arrived.Compare(y.arrived) })
	for i, r := range admitted {
		earliest := firstSent.Add(time.Duration(i)*100*time.Millisecond - time.Millisecond)
		assert.False(t, r.arrived.Before(earliest), "admitted request %d arrived %v after the first send, before its slot %v", i, r.arrived.Sub(firstSent), time.Duration(i)*100*time.Millisecond)
		assert.LessOrEqual(t, r.delay, 2*time.Second, "admitted request %d: no delay beyond the queue's longest", i)
	}
	t.Logf("admitted %d of %d; decisions took %v; last admitted after %v", len(admitted), n, lastDecision.Sub(firstSent), admitted[len(admitted)-1].arrived.Sub(firstSent))
}

// metric reads one sample of the instance's /metrics (0 when absent).
func metric(t *testing.T, in *instance, name string, labels ...string) float64 {
	t.Helper()
	body := call(t, http.MethodGet, in.url("/metrics")).body
	for _, line := range regexp.MustCompile(`(?m)^`+regexp.QuoteMeta(name)+`\{([^}]*)\} (\S+)$`).FindAllStringSubmatch(body, -1) {
		match := true
		for i := 0; i+1 < len(labels); i += 2 {
			if !regexp.MustCompile(`(^|,)` + labels[i] + `="` + regexp.QuoteMeta(labels[i+1]) + `"`).MatchString(line[1]) {
				match = false
			}
		}
		if match {
			v, err := strconv.ParseFloat(line[2], 64)
			require.NoError(t, err)
			return v
		}
	}
	return 0
}

// waitMetric waits, at most 5 s, until the sample reaches want.
func waitMetric(t *testing.T, in *instance, want float64, name string, labels ...string) {
	t.Helper()
	for stop := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		got := metric(t, in, name, labels...)
		if got >= want {
			return
		}
		require.True(t, time.Now().Before(stop), "%s%v stayed %v, want %v\n%s", name, labels, got, want, in.logs())
	}
}

// TestE2ELeavingTheQueueGivesTheSlotBack: on a queue of 2 waiting (one
// slot per 10 s, so none frees by itself during the test), a client fills
// the queue and is denied; one waiter disconnects, its slot is given back
// (tlb_ratelimit_delayed_total{result="left_refunded"}), and the next
// request takes it: admitted and held, not denied.
func TestE2ELeavingTheQueueGivesTheSlotBack(t *testing.T) {
	a, _ := startQueueInstances(t)
	url := a.url("/api/v1/slow")
	const client = "198.51.100.71"
	began := time.Now()
	allowed := func(want float64) {
		waitMetric(t, a, want, "tlb_ratelimit_outcomes_total", "policy", "slow", "decision", "allowed")
	}
	require.Equal(t, http.StatusNotFound, call(t, http.MethodGet, url, "X-Forwarded-For", client).status, "the first goes at once (then the API's 404)")
	// hold sends a request that will be held; cancel makes its client leave.
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait)
	hold := func() (cancel context.CancelFunc) {
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		require.NoError(t, err)
		req.Header.Set("X-Forwarded-For", client)
		wg.Go(func() {
			resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
			if err == nil {
				_ = resp.Body.Close()
				assert.NotEqual(t, http.StatusTooManyRequests, resp.StatusCode, "a held request is never denied afterwards")
			}
		})
		return cancel
	}
	hold()
	allowed(2)
	leave := hold()
	allowed(3)
	require.Equal(t, http.StatusTooManyRequests, call(t, http.MethodGet, url, "X-Forwarded-For", client).status, "the queue is full")

	leave()
	waitMetric(t, a, 1, "tlb_ratelimit_delayed_total", "policy", "slow", "result", "left_refunded")
	hold()
	allowed(4)
	require.Less(t, time.Since(began), 10*time.Second, "no slot freed by itself: the one taken is the one given back")
	assert.Equal(t, 1.0, metric(t, a, "tlb_ratelimit_outcomes_total", "policy", "slow", "decision", "denied"), "only the request sent while the queue was full was denied")
}
