package redistest

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTLSServerMutual: a TLS-only server with tls-auth-clients yes answers
// the admin client and a client with a CA-issued certificate, has no
// plaintext listener (port 0), and refuses a client without a certificate.
// It survives Kill and Restart with the same material.
func TestTLSServerMutual(t *testing.T) {
	s := Start(t, WithTLS(TLSOptions{}))
	m := s.TLS()
	require.NotNil(t, m)
	assert.Equal(t, TLSAuthYes, m.AuthClients)

	cfg, err := s.Client().ConfigGet(AdminCtx(t), "port").Result()
	require.NoError(t, err)
	assert.Equal(t, "0", cfg["port"], "no plaintext listener")
	cfg, err = s.Client().ConfigGet(AdminCtx(t), "tls-port").Result()
	require.NoError(t, err)
	assert.Equal(t, s.Addr()[len("127.0.0.1:"):], cfg["tls-port"])

	require.NoError(t, newClient(t, s, nil).Ping(AdminCtx(t)).Err(), "client certificate from the CA")

	noCert := newClient(t, s, func(o *redis.Options) { o.TLSConfig.Certificates = nil })
	require.Error(t, noCert.Ping(AdminCtx(t)).Err(), "no client certificate while the server requires one")

	plain := newClient(t, s, func(o *redis.Options) { o.TLSConfig = nil })
	require.Error(t, plain.Ping(AdminCtx(t)).Err(), "plaintext against the TLS port")

	s.Require(t, CapKill, CapRestart)
	s.Kill()
	s.Restart()
	require.NoError(t, newClient(t, s, nil).Ping(AdminCtx(t)).Err(), "after restart")
}

// TestTLSServerOptional: with tls-auth-clients optional a client without a
// certificate is accepted.
func TestTLSServerOptional(t *testing.T) {
	s := Start(t, WithTLS(TLSOptions{AuthClients: TLSAuthOptional}))
	noCert := newClient(t, s, func(o *redis.Options) { o.TLSConfig.Certificates = nil })
	require.NoError(t, noCert.Ping(AdminCtx(t)).Err())
}

// TestTLSServerExpiredCertificate: a server presenting an expired
// certificate still starts (the admin client verifies at a time inside the
// certificate's validity), and a normal client refuses it as expired.
func TestTLSServerExpiredCertificate(t *testing.T) {
	ca := NewCA(t)
	expired := ca.Issue(t, "expired", CertOptions{
		Server:    true,
		IPs:       []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore: time.Now().Add(-48 * time.Hour),
		NotAfter:  time.Now().Add(-24 * time.Hour),
	})
	s := Start(t, WithTLS(TLSOptions{CA: ca, ServerCert: expired}))
	err := newClient(t, s, nil).Ping(AdminCtx(t)).Err()
	var cie x509.CertificateInvalidError
	require.True(t, errors.As(err, &cie), "%v", err)
	assert.Equal(t, x509.Expired, cie.Reason)
}

// TestCertificatesAreFreshFiles: the CA writes owner-only PEM files that
// load as a key pair, and two CAs are distinct.
func TestCertificatesAreFreshFiles(t *testing.T) {
	a, b := NewCA(t), NewCA(t)
	assert.False(t, a.Cert.Equal(b.Cert))
	cp := a.Issue(t, "client", CertOptions{})
	st, err := os.Stat(cp.KeyFile)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	_, err = tls.LoadX509KeyPair(cp.CertFile, cp.KeyFile)
	require.NoError(t, err)
	_, err = cp.Cert.Verify(x509.VerifyOptions{Roots: a.Pool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	require.NoError(t, err)
	_, err = cp.Cert.Verify(x509.VerifyOptions{Roots: b.Pool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	require.Error(t, err, "another CA does not vouch for it")

	_, err = a.issue("../escape", CertOptions{})
	require.Error(t, err)
}

func TestWithTLSRejectsUnknownAuthMode(t *testing.T) {
	st := &tlsSetup{opts: TLSOptions{AuthClients: "sometimes"}}
	require.ErrorContains(t, st.prepare(t), `AuthClients "sometimes"`)
}
