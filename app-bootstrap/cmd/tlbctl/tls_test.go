package main

import (
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
)

// tlsEnv is setup's environment pointed at a TLS-only server with both ACL
// users, tlbctl presenting a client certificate of the server's CA.
func tlsEnv(t *testing.T, opts redistest.TLSOptions) (*redistest.Server, map[string]string) {
	t.Helper()
	_, env := setup(t)
	rs := redistest.Start(t, redistest.WithTLS(opts))
	require.NoError(t, rs.Client().Do(ctxT(t), aclRateUser(t)...).Err())
	require.NoError(t, rs.Client().Do(ctxT(t), aclCtlUser(t)...).Err())
	m := rs.TLS()
	cert := m.CA.Issue(t, "tlb-ctl", redistest.CertOptions{})
	env["APP_RATE_LIMIT_REDIS_ADDR"] = rs.Addr()
	env["APP_RATE_LIMIT_REDIS_TLS_ENABLED"] = "true"
	env["APP_RATE_LIMIT_REDIS_TLS_CA_FILE"] = m.CA.CertFile
	env["APP_RATE_LIMIT_REDIS_TLS_CERT_FILE"] = cert.CertFile
	env["APP_RATE_LIMIT_REDIS_TLS_KEY_FILE"] = cert.KeyFile
	return rs, env
}

// TestCheckOverTLS: over mutual TLS the check passes and reports the
// negotiated version and the certificate's expiry; a certificate that
// expires within two weeks is a problem; an unknown CA names the variable.
func TestCheckOverTLS(t *testing.T) {
	_, env := tlsEnv(t, redistest.TLSOptions{})
	r := tlbctl(t, environ(env), "check")
	require.Equal(t, exitOK, r.code, "%s\n%s", r.stdout, r.stderr)
	assert.Regexp(t, `tls\s+ok\s+TLS 1\.[23], verified against .*ca\.pem, server name 127\.0\.0\.1, client certificate .*tlb-ctl\.pem, server certificate valid until`, r.stdout)

	other := redistest.NewCA(t)
	r = tlbctl(t, environ(env, "APP_RATE_LIMIT_REDIS_TLS_CA_FILE", other.CertFile), "check")
	assert.Equal(t, exitProblem, r.code)
	assert.Regexp(t, `connection\s+PROBLEM\s+.*APP_RATE_LIMIT_REDIS_TLS_CA_FILE: the server's certificate is not signed by a trusted CA`, r.stdout)

	ca := redistest.NewCA(t)
	soon := ca.Issue(t, "soon", redistest.CertOptions{Server: true, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, NotAfter: time.Now().Add(7 * 24 * time.Hour)})
	_, env = tlsEnv(t, redistest.TLSOptions{CA: ca, ServerCert: soon})
	r = tlbctl(t, environ(env), "check")
	assert.Equal(t, exitProblem, r.code, r.stdout)
	assert.Regexp(t, `tls\s+PROBLEM\s+.*\(expires in \d+h0m0s: renew it\)`, r.stdout)
}
