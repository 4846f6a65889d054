package main

import (
	"bytes"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"

	"github.com/tech-log/tech-log-backend/adapter-inbound-web/subject"
	"github.com/tech-log/tech-log-backend/app-bootstrap/config"
	"github.com/tech-log/tech-log-backend/app-bootstrap/wiring"
)

// TestResetInvalidatesTheServiceDenialCache: a running service (its own
// connection, the least-privilege user) has the API key's login denial in
// its denial cache; tlbctl reset --yes deletes the state and publishes the
// key, and the service applies it within a second: its next login is
// admitted (without the invalidation the cached denial would last the
// refill hour).
func TestResetInvalidatesTheServiceDenialCache(t *testing.T) {
	_, env := setup(t)
	cfg, err := config.Load(env)
	require.NoError(t, err)
	var srv *wiring.Server
	app := fxtest.New(t, wiring.Options(cfg, wiring.NewLogger(config.Log{Format: config.LogText, Level: 8}, &bytes.Buffer{})), fx.Populate(&srv))
	app.RequireStart()
	defer app.RequireStop()
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	login := func() int {
		req, err := http.NewRequest(http.MethodPost, "http://"+srv.Addr()+"/api/v1/login", nil)
		require.NoError(t, err)
		req.Header.Set(subject.APIKeyHeader, testAPIKey)
		resp, err := client.Do(req)
		require.NoError(t, err)
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	metric := func(name string) string {
		resp, err := client.Get("http://" + srv.Addr() + "/metrics")
		require.NoError(t, err)
		defer resp.Body.Close()
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		for _, l := range bytes.Split(b.Bytes(), []byte("\n")) {
			if v, ok := bytes.CutPrefix(l, []byte(name+" ")); ok {
				return string(v)
			}
		}
		return "(absent)"
	}
	// The service subscribes at start; its cache serves once subscribed.
	require.Eventually(t, func() bool { return metric("tlb_ratelimit_denial_cache_live") == "1" }, 5*time.Second, 10*time.Millisecond)
	for range 5 {
		require.Equal(t, http.StatusOK, login())
	}
	require.Equal(t, http.StatusTooManyRequests, login(), "the server's denial")
	require.Equal(t, http.StatusTooManyRequests, login(), "the cached denial")
	require.Equal(t, "1", metric("tlb_ratelimit_denial_cache_hits_total"))

	done := tlbctl(t, environ(env), "reset", "--policy", "login", "--api-key-file", keyFile(t, testAPIKey), "--yes")
	require.Equal(t, exitOK, done.code, done.stderr)
	assert.Contains(t, done.stdout, "invalidation published on tlb-denial-cache-invalidate: 1 subscribed")
	require.Eventually(t, func() bool { return metric("tlb_ratelimit_denial_cache_invalidations_total") == "1" }, time.Second, 5*time.Millisecond,
		"the service did not receive the invalidation within a second")
	assert.Equal(t, http.StatusOK, login(), "after the reset the service asks the server")
	assert.Equal(t, "1", metric("tlb_ratelimit_denial_cache_hits_total"))
}

// TestCheckReportsTheDenialCacheACL: check says whether the service's
// user may subscribe to invalidations; without it the denial cache stays
// off, which check reports as info, not a problem.
func TestCheckReportsTheDenialCacheACL(t *testing.T) {
	rs, env := setup(t)
	r := tlbctl(t, environ(env), "check")
	require.Equal(t, exitOK, r.code, r.stdout)
	assert.Regexp(t, `denial cache acl\s+ok\s+user tlb-rate may subscribe to tlb-denial-cache-invalidate and its heartbeat channel`, r.stdout)

	require.NoError(t, rs.Client().Do(ctxT(t), "ACL", "SETUSER", "tlb-rate", "resetchannels").Err())
	r = tlbctl(t, environ(env), "check")
	require.Equal(t, exitOK, r.code, r.stdout)
	assert.Regexp(t, `denial cache acl\s+info\s+user tlb-rate may not SUBSCRIBE, PUBLISH on tlb-denial-cache-invalidate\*`, r.stdout)
}
