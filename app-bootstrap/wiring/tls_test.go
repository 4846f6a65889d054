package wiring

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
	"github.com/tech-log/tech-log-backend/app-bootstrap/metrics"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// aclRateUser is the provider's least-privilege user of docs/operations.md,
// word for word (test password).
func aclRateUser(t testing.TB) []any {
	return redistest.DocumentedACLUser(t, "tlb-rate", "rate-test-pass")
}

func setRateUser(t *testing.T, rs *redistest.Server) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, rs.Client().Do(ctx, aclRateUser(t)...).Err())
}

// tlsKV configures the limiter for the TLS server rs as tlb-rate with a
// client certificate; the timeouts leave room for TLS handshakes under -race.
func tlsKV(t *testing.T, rs *redistest.Server) []string {
	t.Helper()
	m := rs.TLS()
	cert := m.CA.Issue(t, "tlb-rate", redistest.CertOptions{})
	return append(enabledKV(rs.Addr()),
		"APP_RATE_LIMIT_REDIS_USERNAME", "tlb-rate",
		"APP_RATE_LIMIT_REDIS_PASSWORD", "rate-test-pass",
		"APP_RATE_LIMIT_REDIS_TLS_ENABLED", "true",
		"APP_RATE_LIMIT_REDIS_TLS_CA_FILE", m.CA.CertFile,
		"APP_RATE_LIMIT_REDIS_TLS_CERT_FILE", cert.CertFile,
		"APP_RATE_LIMIT_REDIS_TLS_KEY_FILE", cert.KeyFile,
		"APP_RATE_LIMIT_COMMAND_TIMEOUT", "1s",
		"APP_RATE_LIMIT_DIAL_TIMEOUT", "500ms",
		"APP_RATE_LIMIT_POOL_TIMEOUT", "500ms",
		"APP_WEB_EVALUATION_TIMEOUT", "3s",
	)
}

// TestTLSServiceReadyAndLimits: over mutual TLS as tlb-rate (the user
// docs/operations.md documents), the whole graph becomes ready and admits,
// and the denial cache subscribes to its invalidations and heartbeat
// channel (the documented channel permission is enough: without it the
// cache stays off, tlb_ratelimit_denial_cache_live 0).
func TestTLSServiceReadyAndLimits(t *testing.T) {
	rs := redistest.Start(t, redistest.WithTLS(redistest.TLSOptions{}))
	setRateUser(t, rs)
	cfg := loadConfig(t, tlsKV(t, rs)...)
	var srv *Server
	app := fxtest.New(t, Options(cfg, quietLogger()), fx.Populate(&srv))
	app.RequireStart()
	defer app.RequireStop()
	base := "http://" + srv.Addr()
	resp, body := do(t, http.MethodGet, base+PathReadyz)
	assert.Equal(t, http.StatusOK, resp.StatusCode, body)
	resp, body = do(t, http.MethodGet, base+PathPing)
	assert.Equal(t, http.StatusOK, resp.StatusCode, body)
	assert.Equal(t, "100", resp.Header.Get("RateLimit-Limit"))
	live := metrics.DenialCacheLive + " 1\n"
	var m string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if _, m = do(t, http.MethodGet, base+PathMetrics); strings.Contains(m, live) {
			break
		}
	}
	assert.Contains(t, m, live, "the denial cache did not become live as the documented tlb-rate user")
}

// TestTLSFailuresNameTheVariable: each TLS misconfiguration makes the
// readiness check fail with a ConnError naming the variable at fault, and
// the port answer Unavailable{connection}.
func TestTLSFailuresNameTheVariable(t *testing.T) {
	rs := redistest.Start(t, redistest.WithTLS(redistest.TLSOptions{}))
	setRateUser(t, rs)
	m := rs.TLS()
	expired := redistest.Start(t, redistest.WithTLS(redistest.TLSOptions{
		CA: m.CA,
		ServerCert: m.CA.Issue(t, "expired", redistest.CertOptions{
			Server: true, IPs: []net.IP{net.IPv4(127, 0, 0, 1)},
			NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-24 * time.Hour),
		}),
	}))
	setRateUser(t, expired)
	plain := redistest.Start(t)
	setRateUser(t, plain)
	other := redistest.NewCA(t)
	base := tlsKV(t, rs)

	cases := []struct {
		name    string
		kv      []string
		wantVar string
	}{
		{"unknown CA", []string{"APP_RATE_LIMIT_REDIS_TLS_CA_FILE", other.CertFile}, "APP_RATE_LIMIT_REDIS_TLS_CA_FILE"},
		{"wrong server name", []string{"APP_RATE_LIMIT_REDIS_TLS_SERVER_NAME", "wrong.test"}, "APP_RATE_LIMIT_REDIS_TLS_SERVER_NAME"},
		{"expired server certificate", []string{"APP_RATE_LIMIT_REDIS_ADDR", expired.Addr()}, "APP_RATE_LIMIT_REDIS_ADDR"},
		{"client certificate missing", []string{"APP_RATE_LIMIT_REDIS_TLS_CERT_FILE", "", "APP_RATE_LIMIT_REDIS_TLS_KEY_FILE", ""}, "APP_RATE_LIMIT_REDIS_TLS_CERT_FILE"},
		{"plaintext against the TLS port", []string{"APP_RATE_LIMIT_REDIS_TLS_ENABLED", "false", "APP_RATE_LIMIT_REDIS_TLS_CA_FILE", "",
			"APP_RATE_LIMIT_REDIS_TLS_CERT_FILE", "", "APP_RATE_LIMIT_REDIS_TLS_KEY_FILE", ""}, "APP_RATE_LIMIT_REDIS_TLS_ENABLED"},
		{"TLS against a plaintext port", []string{"APP_RATE_LIMIT_REDIS_ADDR", plain.Addr()}, "APP_RATE_LIMIT_REDIS_TLS_ENABLED"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := loadConfig(t, append(append([]string(nil), base...), tc.kv...)...)
			lc := fxtest.NewLifecycle(t)
			p, err := newPolicies(lc, cfg, quietLogger(), metrics.New())
			require.NoError(t, err)
			lc.RequireStart() // a connection failure at start is not fatal
			defer lc.RequireStop()

			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			err = p.current().c.Ready(ctx)
			require.Error(t, err)
			var ce *ConnError
			require.ErrorAs(t, err, &ce, "%v", err)
			assert.Equal(t, tc.wantVar, ce.Var, "%v", err)
			assert.Equal(t, ReasonTLS, ce.Reason)
			assert.Contains(t, err.Error(), tc.wantVar+": ")
			assert.NotContains(t, err.Error(), "rate-test-pass")

			out := p.current().c.provider.Evaluate(ctx, ratelimit.Request{PolicyID: "api", SubjectDigest: "tls-failure-subject-0001", Cost: 1, Deadline: time.Now().Add(3 * time.Second)})
			assert.False(t, ratelimit.Admitted(out), "%v", out)
			assert.Equal(t, ratelimit.KindUnavailable, out.Kind(), "%v", out)
			assert.Equal(t, ratelimit.CategoryConnection, ratelimit.CategoryOf(out), "%v", out)
		})
	}
}

// TestExplainConnErrorLeavesOthersAlone: an error no variable explains
// (refused connection, server down) passes unchanged, and nil stays nil.
func TestExplainConnErrorLeavesOthersAlone(t *testing.T) {
	cfg := loadConfig(t, enabledKV("127.0.0.1:1")...)
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connect: connection refused")}
	assert.Same(t, error(refused), ExplainConnError("APP_RATE_LIMIT_REDIS_", cfg.RateLimit.Redis, refused))
	assert.NoError(t, ExplainConnError("APP_RATE_LIMIT_REDIS_", cfg.RateLimit.Redis, nil))
	ce := &ConnError{Var: "X", Reason: ReasonTLS, Hint: "h", Err: io.EOF}
	assert.Same(t, error(ce), ExplainConnError("APP_RATE_LIMIT_REDIS_", cfg.RateLimit.Redis, ce), "explained once")
}
