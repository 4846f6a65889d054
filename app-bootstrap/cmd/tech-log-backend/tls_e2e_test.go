package main_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
)

// e2eRateUser is the provider's least-privilege ACL user of
// docs/operations.md, word for word (test password).
func e2eRateUser(t testing.TB) []any {
	return redistest.DocumentedACLUser(t, "tlb-rate", "e2e-rate-pass")
}

// TestE2ETLS: the binary talks mutual TLS to a TLS-only redis-server as
// the least-privilege user: ready, the global limit holds, and with a
// client certificate from another CA it starts, is not ready, fails
// closed and logs the variable at fault.
func TestE2ETLS(t *testing.T) {
	rs := redistest.Start(t, redistest.WithTLS(redistest.TLSOptions{}))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, rs.Client().Do(ctx, e2eRateUser(t)...).Err())
	m := rs.TLS()
	cert := m.CA.Issue(t, "tlb-rate", redistest.CertOptions{})
	tlsEnv := func(caFile string) []string {
		return append(enabledEnv(t, rs.Addr()),
			"APP_RATE_LIMIT_REDIS_USERNAME=tlb-rate",
			"APP_RATE_LIMIT_REDIS_PASSWORD=e2e-rate-pass",
			"APP_RATE_LIMIT_REDIS_TLS_ENABLED=true",
			"APP_RATE_LIMIT_REDIS_TLS_CA_FILE="+caFile,
			"APP_RATE_LIMIT_REDIS_TLS_CERT_FILE="+cert.CertFile,
			"APP_RATE_LIMIT_REDIS_TLS_KEY_FILE="+cert.KeyFile,
			"APP_RATE_LIMIT_COMMAND_TIMEOUT=1s",
			"APP_RATE_LIMIT_DIAL_TIMEOUT=1s",
			"APP_RATE_LIMIT_POOL_TIMEOUT=1s",
			"APP_WEB_EVALUATION_TIMEOUT=3s",
		)
	}

	t.Run("mutual TLS", func(t *testing.T) {
		in := startInstance(t, tlsEnv(m.CA.CertFile))
		require.Equal(t, http.StatusOK, call(t, http.MethodGet, in.url("/readyz")).status, in.logs())
		allowed := 0
		for range 12 {
			r := call(t, http.MethodGet, in.url("/api/v1/ping"), "X-API-Key", "e2e-tls-client")
			switch r.status {
			case http.StatusOK:
				allowed++
			case http.StatusTooManyRequests:
			default:
				t.Fatalf("status %d: %s\n%s", r.status, r.body, in.logs())
			}
		}
		assert.Equal(t, 10, allowed, "the policy's capacity, over TLS")
		assert.NotContains(t, in.logs(), "e2e-rate-pass")
	})

	t.Run("unknown CA", func(t *testing.T) {
		other := redistest.NewCA(t)
		in := startInstance(t, tlsEnv(other.CertFile))
		assert.Equal(t, http.StatusServiceUnavailable, call(t, http.MethodGet, in.url("/readyz")).status)
		r := call(t, http.MethodGet, in.url("/api/v1/ping"), "X-API-Key", "e2e-tls-client")
		assert.Equal(t, http.StatusServiceUnavailable, r.status)
		assert.Contains(t, r.body, `"connection"`, r.body)
		logs := in.logs()
		assert.True(t, strings.Contains(logs, "APP_RATE_LIMIT_REDIS_TLS_CA_FILE: the server's certificate is not signed by a trusted CA"), logs)
		assert.NotContains(t, logs, "e2e-rate-pass")
	})
}
