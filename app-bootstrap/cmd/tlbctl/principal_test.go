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

	"github.com/tech-log/tech-log-backend/app-bootstrap/config"
	"github.com/tech-log/tech-log-backend/app-bootstrap/wiring"
)

// identityHeader is the principal header of principalEnv.
const identityHeader = "X-Authenticated-User"

// principalEnv switches env to the trusted-header identity: the test
// client on 127.0.0.1 is the authenticating proxy.
func principalEnv(env map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range env {
		out[k] = v
	}
	delete(out, "APP_WEB_API_KEYS_FILE")
	out["APP_WEB_IDENTITY"] = "trusted-header"
	out["APP_WEB_IDENTITY_HEADER"] = identityHeader
	out["APP_WEB_TRUSTED_PROXIES"] = "127.0.0.1"
	return out
}

// servePrincipal runs the service on env and sends n logins as principal
// (through the trusted proxy), returning the last status.
func servePrincipal(t *testing.T, env map[string]string, principal string, n int) int {
	t.Helper()
	cfg, err := config.Load(env)
	require.NoError(t, err)
	var srv *wiring.Server
	app := fxtest.New(t, wiring.Options(cfg, wiring.NewLogger(config.Log{Format: config.LogText, Level: 8}, &bytes.Buffer{})), fx.Populate(&srv))
	app.RequireStart()
	defer app.RequireStop()
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	status := 0
	for range n {
		req, err := http.NewRequest(http.MethodPost, "http://"+srv.Addr()+"/api/v1/login", nil)
		require.NoError(t, err)
		req.Header.Set(identityHeader, principal)
		resp, err := client.Do(req)
		require.NoError(t, err)
		_ = resp.Body.Close()
		status = resp.StatusCode
	}
	return status
}

// TestPrincipalRoundTrip: the principal the edge limited is found by
// --principal (the header value's surrounding spaces trimmed as the edge
// trims them), not under another principal nor the proxy's IP; reset
// removes it; --principal against an API-key service warns.
func TestPrincipalRoundTrip(t *testing.T) {
	rs, base := setup(t)
	env := principalEnv(base)
	require.Equal(t, http.StatusOK, servePrincipal(t, env, "bob", 3))
	keys, err := rs.Client().Keys(ctxT(t), "tlb:rate:login:*").Result()
	require.NoError(t, err)
	require.Len(t, keys, 1)

	r := tlbctl(t, environ(env), "inspect", "--policy", "login", "--principal", " bob ")
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Empty(t, r.stderr, "no warning in trusted-header mode")
	assert.Equal(t, keys[0], keyOf(r.stdout))
	assert.Contains(t, r.stdout, "remaining   2 of 5 (consumed 3)")

	for _, args := range [][]string{{"--principal", "Bob"}, {"--ip", "127.0.0.1"}} {
		o := tlbctl(t, environ(env), append([]string{"inspect", "--policy", "login"}, args...)...)
		require.Equal(t, exitOK, o.code, o.stderr)
		assert.Contains(t, o.stdout, "state       absent", args)
		assert.Empty(t, o.stderr, "an IP is an identity of trusted-header mode too")
	}

	done := tlbctl(t, environ(env), "reset", "--policy", "login", "--principal", "bob", "--yes")
	require.Equal(t, exitOK, done.code, done.stderr)
	n, err := rs.Client().Exists(ctxT(t), keys[0]).Result()
	require.NoError(t, err)
	assert.Zero(t, n)

	w := tlbctl(t, environ(base), "inspect", "--policy", "login", "--principal", "bob")
	require.Equal(t, exitOK, w.code, w.stderr)
	assert.Equal(t, "tlbctl: warning: APP_WEB_IDENTITY is api-key: the service never identifies a client by its trusted-header principal, so it keeps no state under this key\n", w.stderr)
	assert.Equal(t, keys[0], keyOf(w.stdout), "the key does not depend on the mode or the header name")
}
