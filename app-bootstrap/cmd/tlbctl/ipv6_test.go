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

// TestInspectIPv6Prefix: the service keys an IPv6 client by its /64
// (APP_WEB_IPV6_PREFIX default); tlbctl --ip finds that key from any
// address of the /64, and not from another /64.
func TestInspectIPv6Prefix(t *testing.T) {
	_, env := setup(t)
	delete(env, "APP_WEB_IDENTITY")
	delete(env, "APP_WEB_API_KEYS_FILE")
	env["APP_WEB_TRUSTED_PROXIES"] = "127.0.0.1" // X-Forwarded-For names the client
	cfg, err := config.Load(env)
	require.NoError(t, err)
	var srv *wiring.Server
	app := fxtest.New(t, wiring.Options(cfg, wiring.NewLogger(config.Log{Format: config.LogText, Level: 8}, &bytes.Buffer{})), fx.Populate(&srv))
	app.RequireStart()
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for range 3 {
		req, err := http.NewRequest(http.MethodGet, "http://"+srv.Addr()+"/api/v1/ping", nil)
		require.NoError(t, err)
		req.Header.Set("X-Forwarded-For", "2001:db8:1:2::1")
		resp, err := client.Do(req)
		require.NoError(t, err)
		_ = resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
	}
	app.RequireStop()

	r := tlbctl(t, environ(env), "inspect", "--policy", "api", "--ip", "2001:db8:1:2:ffff::7")
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, "remaining   97 of 100 (consumed 3)", "another address of the same /64")
	other := tlbctl(t, environ(env), "inspect", "--policy", "api", "--ip", "2001:db8:1:3::1")
	require.Equal(t, exitOK, other.code, other.stderr)
	assert.Contains(t, other.stdout, "state       absent", "another /64")
}
