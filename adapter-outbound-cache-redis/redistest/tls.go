package redistest

import (
	"crypto/tls"
	"fmt"
	"net"
	"testing"
	"time"
)

// Values of TLSOptions.AuthClients (redis.conf tls-auth-clients).
const (
	// TLSAuthYes requires a client certificate signed by the CA (mutual TLS).
	TLSAuthYes = "yes"
	// TLSAuthOptional verifies a client certificate when one is sent and
	// accepts clients without one.
	TLSAuthOptional = "optional"
	// TLSAuthNo never asks for a client certificate.
	TLSAuthNo = "no"
)

// TLSServerName is a DNS name in every server certificate redistest issues
// by default, besides the IP SANs 127.0.0.1 and ::1.
const TLSServerName = "redis.test"

// TLSOptions configures a TLS-only server; see [WithTLS].
type TLSOptions struct {
	// CA signs the server and admin certificates and is the server's
	// tls-ca-cert-file (optional: a new CA when nil).
	CA *CA
	// AuthClients is TLSAuthYes (the default when empty), TLSAuthOptional
	// or TLSAuthNo.
	AuthClients string
	// ServerCert is the certificate the server presents (optional: one the
	// CA issues for 127.0.0.1, ::1, localhost and TLSServerName). Pass an
	// expired one, or one for another name, to test the client's checks.
	ServerCert *CertPair
}

// TLS is the TLS material of a server started [WithTLS].
type TLS struct {
	// CA is the authority of the server certificate and of accepted client
	// certificates.
	CA *CA
	// Server is the certificate the server presents.
	Server *CertPair
	// Client is a client certificate the CA issued; the admin client uses
	// it, and tests may too.
	Client *CertPair
	// AuthClients is the server's tls-auth-clients setting.
	AuthClients string
}

// ClientConfig returns a fresh client configuration trusting only the CA,
// presenting Client, TLS 1.2 or later; ServerName is left empty (the
// dialer uses the address host, 127.0.0.1, which the default server
// certificate names).
func (m *TLS) ClientConfig() *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		RootCAs:      m.CA.Pool(),
		Certificates: []tls.Certificate{m.Client.TLS},
	}
}

// adminConfig is ClientConfig verified at a time inside the server
// certificate's validity, so that the admin client (and the start-up
// probe) still reach a server that presents an expired certificate on
// purpose. Chain and name are verified as usual.
func (m *TLS) adminConfig(host string) *tls.Config {
	c := m.ClientConfig()
	c.ServerName = host
	nb, na := m.Server.Cert.NotBefore, m.Server.Cert.NotAfter
	at := nb.Add(na.Sub(nb) / 2)
	c.Time = func() time.Time { return at }
	return c
}

// WithTLS makes the server TLS-only: redis-server gets tls-port on the
// chosen port, port 0 (no plaintext listener), the CA, a server
// certificate and tls-auth-clients. The admin client and the start-up PING
// speak TLS with [TLS.Client]; [Server.Options] carries
// [TLS.ClientConfig]; [Server.TLS] returns the material. Only the process
// lane runs TLS servers: the container and external lanes skip the test.
func WithTLS(o TLSOptions) Option {
	return func(c *config) { c.tls = &tlsSetup{opts: o} }
}

// tlsSetup is the TLS part of a config: the options, then the material
// prepare generated.
type tlsSetup struct {
	opts TLSOptions
	m    *TLS
}

// prepare generates the missing material and validates the options.
func (s *tlsSetup) prepare(t testing.TB) error {
	t.Helper()
	o := s.opts
	switch o.AuthClients {
	case "":
		o.AuthClients = TLSAuthYes
	case TLSAuthYes, TLSAuthOptional, TLSAuthNo:
	default:
		return fmt.Errorf("redistest: WithTLS: AuthClients %q: want %q, %q or %q", o.AuthClients, TLSAuthYes, TLSAuthOptional, TLSAuthNo)
	}
	if o.CA == nil {
		o.CA = NewCA(t)
	}
	if o.ServerCert == nil {
		o.ServerCert = o.CA.Issue(t, "server", CertOptions{
			Server:   true,
			DNSNames: []string{"localhost", TLSServerName},
			IPs:      []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		})
	}
	s.m = &TLS{
		CA:          o.CA,
		Server:      o.ServerCert,
		Client:      o.CA.Issue(t, "redistest-admin", CertOptions{}),
		AuthClients: o.AuthClients,
	}
	return nil
}

// args are the redis-server TLS arguments; the launcher binds the chosen
// port with --tls-port (redisserver.Process.TLS).
func (s *tlsSetup) args() []string {
	return []string{
		"--port", "0",
		"--tls-cert-file", s.m.Server.CertFile,
		"--tls-key-file", s.m.Server.KeyFile,
		"--tls-ca-cert-file", s.m.CA.CertFile,
		"--tls-auth-clients", s.m.AuthClients,
		"--tls-protocols", "TLSv1.2 TLSv1.3",
	}
}

// probeTLS is the client configuration of the launcher's start-up probes:
// nil for plaintext, the admin configuration for a TLS server.
func (c *config) probeTLS() *tls.Config {
	if c.tls == nil {
		return nil
	}
	return c.tls.m.adminConfig("127.0.0.1")
}

// TLS returns the TLS material of a server started [WithTLS], or nil.
func (s *Server) TLS() *TLS { return s.tlsMaterial }

// hostOf returns addr's host, or addr when it has no port.
func hostOf(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return addr
}
