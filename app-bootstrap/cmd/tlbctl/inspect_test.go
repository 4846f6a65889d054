package main

import (
	"bytes"
	"net/http"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/programs"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// TestInspectIP: with the default IP identity, a client on 127.0.0.1 is
// found by --ip.
func TestInspectIP(t *testing.T) {
	_, env := setup(t)
	delete(env, "APP_WEB_IDENTITY")
	delete(env, "APP_WEB_API_KEYS_FILE")
	require.Equal(t, http.StatusOK, serve(t, env, http.MethodGet, "/api/v1/ping", 3))
	r := tlbctl(t, environ(env), "inspect", "--policy", "api", "--ip", "127.0.0.1")
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, "policy      api (revision 1, gcra)")
	assert.Contains(t, r.stdout, "remaining   97 of 100 (consumed 3)")
	assert.Contains(t, r.stdout, "stored      algorithm=gcra revision=1 schema=2")
	// Three admissions of one emission interval (1 h) each: the arrival
	// time is 3 h after the first one, a few ms ago.
	m := regexp.MustCompile(`arrival     (\S+) \(GCRA`).FindStringSubmatch(r.stdout)
	require.Len(t, m, 2, r.stdout)
	tat, err := time.Parse(time.RFC3339Nano, m[1])
	require.NoError(t, err)
	assert.WithinDuration(t, time.Now().Add(3*time.Hour), tat, time.Minute)
}

// TestInspectQueue: a leaky-bucket queue's state (ADR 0028) is decoded
// like GCRA's, its arrival time being when the last slot ends. Its two
// delay-free waiters keep the test from being held.
func TestInspectQueue(t *testing.T) {
	_, env := setup(t)
	delete(env, "APP_WEB_IDENTITY")
	delete(env, "APP_WEB_API_KEYS_FILE")
	// Admitted (not 429), then answered by the API, which has no such page.
	require.Equal(t, http.StatusNotFound, serve(t, env, http.MethodGet, "/api/v1/queue", 2))
	r := tlbctl(t, environ(env), "inspect", "--policy", "queue", "--ip", "127.0.0.1")
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, "policy      queue (revision 1, leaky_bucket)")
	assert.Contains(t, r.stdout, "remaining   1 of 3 (consumed 2)")
	assert.Contains(t, r.stdout, "stored      algorithm=leaky_bucket revision=1 schema=2")
	m := regexp.MustCompile(`arrival     (\S+) \(the queue's last slot ends`).FindStringSubmatch(r.stdout)
	require.Len(t, m, 2, r.stdout)
	tat, err := time.Parse(time.RFC3339Nano, m[1])
	require.NoError(t, err)
	assert.WithinDuration(t, time.Now().Add(2*time.Hour), tat, time.Minute, "two slots of one hour")
}

// TestInspectPrintsTheSlidingLog: inspect decodes a sliding log's state
// (ADR 0024): the decision now, the header fields, and the entries, with
// the oldest and newest admission.
func TestInspectPrintsTheSlidingLog(t *testing.T) {
	p, err := ratelimit.NewPolicy(ratelimit.PolicySpec{ID: "roll", Revision: 2, Algorithm: ratelimit.AlgorithmSlidingLog,
		Params: ratelimit.SlidingLog{Limit: 10, Window: time.Minute}, MaxCost: 5, CleanupGrace: time.Minute,
		FailurePolicy: ratelimit.FailClosed})
	require.NoError(t, err)
	const t0 = int64(1_796_000_000_000)
	r, st := programs.Evaluate(p, nil, t0, 2)
	require.Equal(t, programs.StatusAllowed, r.Status)
	r, st = programs.Evaluate(p, st, t0+10, 1)
	require.Equal(t, programs.StatusAllowed, r.Status)
	var b bytes.Buffer
	printState(&b, target{policy: p, kind: kindIP, shown: "127.0.0.1", key: "k"}, state{raw: st, ttl: time.Minute, now: time.UnixMilli(t0 + 30)})
	out := b.String()
	assert.Contains(t, out, "policy      roll (revision 2, sliding_log)")
	assert.Contains(t, out, "stored      algorithm=sliding_log revision=2 schema=2")
	assert.Contains(t, out, "remaining   7 of 10 (consumed 3)")
	assert.Contains(t, out, "fields      a=5 l=1796000000010 n=2 r=2 s=3 v=2")
	assert.Contains(t, out, "log         2 entries, cost 3 (8 bytes each)")
	assert.Contains(t, out, "oldest      "+time.UnixMilli(t0).UTC().Format(time.RFC3339Nano)+" cost 2 (30ms ago)")
	assert.Contains(t, out, "newest      "+time.UnixMilli(t0+10).UTC().Format(time.RFC3339Nano)+" cost 1 (20ms ago)")
	// The probe (one unit, now) would be admitted: reset one window on.
	assert.Contains(t, out, "reset at    "+time.UnixMilli(t0+30+60_000).UTC().Format(time.RFC3339Nano))
}
