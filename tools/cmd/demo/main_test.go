package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
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
	lines := strings.Split(strings.TrimSpace(apiKeysFile(3)), "\n")
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
