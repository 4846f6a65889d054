package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestWindowsTouched(t *testing.T) {
	w := 5 * time.Second
	at := func(ms int64) time.Time { return time.UnixMilli(ms) }
	tests := []struct {
		from, to int64
		want     int64
	}{
		{10_000, 10_000, 1},
		{10_000, 14_999, 1},
		{10_000, 15_000, 2},
		{14_999, 15_000, 2},
		{12_000, 27_000, 4},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, windowsTouched(at(tt.from), at(tt.to), w), "%d..%d", tt.from, tt.to)
	}
	assert.Equal(t, int64(0), windowsTouched(time.Time{}, at(1), w), "a client that sent nothing touched no window")
}

func TestOptionsValidate(t *testing.T) {
	ok := options{clients: 3, requests: 600, duration: 8 * time.Second, rate: 80, concurrency: 4, limit: 20, window: 5 * time.Second}
	require.NoError(t, ok.validate())
	bad := ok
	bad.window = 1500 * time.Millisecond
	bad.requests = 0
	bad.rate = 0
	err := bad.validate()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "-window")
	assert.Contains(t, err.Error(), "-requests")
	assert.Contains(t, err.Error(), "-rate")
}

func TestPolicyFileIsStrictJSON(t *testing.T) {
	o := options{limit: 20, window: 5 * time.Second}
	var doc struct {
		Policies []map[string]any `json:"policies"`
	}
	dec := json.NewDecoder(strings.NewReader(policyFile(o)))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&doc))
	require.Len(t, doc.Policies, 2)
	assert.Equal(t, "demo", doc.Policies[0]["id"])
	assert.Equal(t, float64(20), doc.Policies[0]["limit"])
	assert.Equal(t, "5s", doc.Policies[0]["window"])
	assert.Equal(t, []any{"GET " + demoPath}, doc.Policies[0]["routes"])
}

func result(perClientAllowed []int, failClosed int) loadResult {
	t0 := time.UnixMilli(10_000)
	r := loadResult{perTarget: make([]counts, 2)}
	for i, a := range perClientAllowed {
		r.perClient = append(r.perClient, clientResult{name: clientName(i), counts: counts{allowed: a}, first: t0, last: t0.Add(time.Second)})
		r.total.allowed += a
	}
	r.total.failClosed = failClosed
	return r
}

func TestVerdict(t *testing.T) {
	o := options{limit: 20, window: 5 * time.Second}
	outage := loadResult{total: counts{requests: 10, failClosed: 10}, categories: map[string]int{"connection": 5, "circuit_open": 5}}
	require.NoError(t, verdict(o, result([]int{20, 20}, 0), outage))
	noBreaker := loadResult{total: counts{requests: 10, failClosed: 10}, categories: map[string]int{"connection": 10}}
	assert.ErrorContains(t, verdict(o, result([]int{20, 20}, 0), noBreaker), "circuit_open", "the breaker must show")

	err := verdict(o, result([]int{21, 20}, 0), outage)
	require.Error(t, err, "one admit over the limit fails the demo")
	assert.Contains(t, err.Error(), "demo-client-1: 21 allowed exceeds limit x windows = 20")

	err = verdict(o, result([]int{20}, 0), loadResult{total: counts{requests: 10, failClosed: 9, allowed: 1}})
	require.Error(t, err, "an admit without redis fails the demo")
	assert.Contains(t, err.Error(), "phase 2: 9 of 10")

	require.Error(t, verdict(o, result([]int{20}, 3), outage), "a 503 while redis is up fails the demo")
}

func TestCountsAdd(t *testing.T) {
	var c counts
	c.add(http.StatusOK, nil)
	c.add(http.StatusTooManyRequests, nil)
	c.add(http.StatusServiceUnavailable, nil)
	c.add(http.StatusNotFound, nil)
	c.add(0, io.EOF)
	assert.Equal(t, counts{requests: 5, allowed: 1, denied: 1, failClosed: 1, other: 1, errors: 1}, c)
}

func TestAPIKeysFileHoldsTheClientsDigests(t *testing.T) {
	lines := strings.Split(strings.TrimSpace(apiKeysFile(clientNames(3))), "\n")
	require.Len(t, lines, 3)
	sum := sha256.Sum256([]byte(clientName(0)))
	assert.Equal(t, hex.EncodeToString(sum[:]), lines[0])
	for _, l := range lines {
		assert.Len(t, l, 64)
		assert.NotContains(t, l, "demo-client")
	}
}

func TestVerdictFallback(t *testing.T) {
	o := options{limit: 20, window: 5 * time.Second, fallback: true}
	t0 := time.UnixMilli(10_000)
	local := func(allowed int) loadResult {
		return loadResult{
			total:     counts{requests: 30, allowed: allowed, denied: 30 - allowed},
			perClient: []clientResult{{name: clientName(0), first: t0, last: t0.Add(time.Second)}},
		}
	}
	require.NoError(t, verdict(o, result([]int{20}, 0), local(20)), "2 instances x share 10 in one window")
	assert.ErrorContains(t, verdict(o, result([]int{20}, 0), local(21)), "phase 2: 21 allowed locally, want 1..20")
	assert.ErrorContains(t, verdict(o, result([]int{20}, 0), local(0)), "phase 2: 0 allowed locally")
	assert.Contains(t, policyFile(o), `"failurePolicy": "local-fallback", "fallbackInstances": 2`)
}

func TestProblemCategory(t *testing.T) {
	assert.Equal(t, "circuit_open", problemCategory(`{"type":"about:blank","status":503,"outcome":"unavailable","category":"circuit_open"}`))
	assert.Equal(t, "unknown", problemCategory(`not json`))
	assert.Equal(t, "unknown", problemCategory(`{}`))
}

func TestSFParam(t *testing.T) {
	v, ok := sfParam(`"demo";r=0;t=17`, "t")
	require.True(t, ok)
	assert.Equal(t, int64(17), v)
	v, ok = sfParam(`"demo";q=20;w=30`, "q")
	require.True(t, ok)
	assert.Equal(t, int64(20), v)
	_, ok = sfParam(`"demo";r=0`, "t")
	assert.False(t, ok)
	_, ok = sfParam(``, "t")
	assert.False(t, ok)
	_, ok = sfParam(`"t=3"`, "t")
	assert.False(t, ok, "the item itself is not a parameter")
}

// decided is a response of the demo policy decided at `at` (Unix ms) with
// quota q, answered after latency, its window of w ending at end (Unix ms).
func decided(status int, q int64, at, latency, end int64) response {
	h := http.Header{}
	t := (end - at + 999) / 1000 // rounded up, as the service does
	h.Set("RateLimit", fmt.Sprintf(`"demo";r=0;t=%d`, t))
	h.Set("RateLimit-Policy", fmt.Sprintf(`"demo";q=%d;w=30`, q))
	return response{status: status, header: h, sent: time.UnixMilli(at - latency/2), got: time.UnixMilli(at + latency/2)}
}

func TestDecisionWindow(t *testing.T) {
	w := 30 * time.Second
	for _, tc := range []struct{ at, latency, end, want int64 }{
		{30_000, 0, 60_000, 1},  // at the window's first instant
		{59_999, 0, 60_000, 1},  // at its last
		{59_500, 40, 60_000, 1}, // answered in the next window
		{45_000, 900, 60_000, 1},
		{60_001, 4, 90_000, 2},
	} {
		got, err := decisionWindow(decided(http.StatusOK, 20, tc.at, tc.latency, tc.end), w)
		require.NoError(t, err, "%+v", tc)
		assert.Equal(t, tc.want, got, "%+v", tc)
	}
	_, err := decisionWindow(decided(http.StatusOK, 20, 45_000, 70_000, 60_000), w)
	assert.ErrorContains(t, err, "window ends", "a response slower than a window names no window")
	_, err = decisionWindow(response{status: http.StatusServiceUnavailable, header: http.Header{}}, w)
	assert.ErrorContains(t, err, "without RateLimit")
}

func TestWindowWait(t *testing.T) {
	w := 30 * time.Second
	assert.Zero(t, windowWait(time.UnixMilli(60_000), w), "a whole window left")
	assert.Zero(t, windowWait(time.UnixMilli(60_000+30_000-recoveryBudget.Milliseconds()), w), "exactly the budget left")
	assert.Equal(t, 4*time.Second, windowWait(time.UnixMilli(86_000), w))
	assert.Zero(t, windowWait(time.UnixMilli(86_000), 5*time.Second), "no window holds the budget: no wait")
}

func TestRecoveryVerdict(t *testing.T) {
	o := options{limit: 20, window: 30 * time.Second, fallback: true}
	end := int64(60_000)
	good := func() *recoveryResult {
		res := &recoveryResult{globalPerTarget: []int{hammerGlobal, hammerGlobal}, pendingOutage: 20}
		for i := range 2 {
			r := decided(http.StatusOK, 20, 31_000+int64(i), 2, end)
			r.target = i
			res.pre = append(res.pre, r)
		}
		for i := range 30 {
			status := http.StatusOK
			if i >= 20 {
				status = http.StatusTooManyRequests
			}
			r := decided(status, 10, 32_000+int64(i), 2, end)
			r.target = i % 2
			res.outage = append(res.outage, r)
		}
		for i := range 40 {
			r := decided(http.StatusTooManyRequests, 20, 35_000+int64(i), 2, end)
			r.target = i % 2
			res.after = append(res.after, r)
		}
		return res
	}
	require.NoError(t, recoveryVerdict(o, good()))

	over := good()
	over.after[7].status = http.StatusOK
	assert.ErrorContains(t, recoveryVerdict(o, over), "1 admitted after recovery, the bound max(L, U+A) allows 0 (L 20, U 2, A 20)")

	// A window of its own after the outage's allows L.
	later := good()
	for i := range 20 {
		r := decided(http.StatusOK, 20, 61_000+int64(i), 2, 90_000)
		later.after = append(later.after, r)
	}
	require.NoError(t, recoveryVerdict(o, later), "a new window allows L after recovery")
	later.after = append(later.after, decided(http.StatusOK, 20, 62_000, 2, 90_000))
	assert.ErrorContains(t, recoveryVerdict(o, later), "21 admitted after recovery, the bound max(L, U+A) allows 20")

	lost := good()
	lost.after[3] = response{target: 1, err: io.ErrUnexpectedEOF}
	assert.ErrorContains(t, recoveryVerdict(o, lost), "would not be exact", "an undecided request fails the check")

	pending := good()
	pending.pendingAfter = 3
	assert.ErrorContains(t, recoveryVerdict(o, pending), "tlb_ratelimit_fallback_pending is 3")

	noGlobal := good()
	noGlobal.globalPerTarget[1] = 2
	assert.ErrorContains(t, recoveryVerdict(o, noGlobal), "instance B answered 2 decisions made with Redis")

	oneSided := good()
	for i := range oneSided.outage {
		if oneSided.outage[i].target == 1 {
			oneSided.outage[i].status = http.StatusTooManyRequests
		}
	}
	assert.ErrorContains(t, recoveryVerdict(o, oneSided), "instance B admitted demo-recovery locally 0 times")

	preLocal := good()
	preLocal.pre[0] = decided(http.StatusOK, 10, 31_000, 2, end)
	assert.ErrorContains(t, recoveryVerdict(o, preLocal), "want 200 decided with Redis")
}

func TestMetricSum(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, "# HELP tlb_ratelimit_fallback_pending x\n# TYPE tlb_ratelimit_fallback_pending gauge\n"+
			"tlb_ratelimit_fallback_pending{policy=\"a\"} 3\ntlb_ratelimit_fallback_pending{policy=\"b\"} 4\n"+
			"tlb_ratelimit_fallback_pending_other 100\ntlb_ratelimit_fallback_subjects 9\n")
	}))
	defer srv.Close()
	v, err := metricSum(context.Background(), srv.Client(), srv.URL, "tlb_ratelimit_fallback_pending")
	require.NoError(t, err)
	assert.Equal(t, 7.0, v)
	_, err = metricSum(context.Background(), srv.Client(), srv.URL, "tlb_absent")
	assert.ErrorContains(t, err, "no sample")
}
