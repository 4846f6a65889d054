package wiring

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redisrate"
	"github.com/tech-log/tech-log-backend/app-bootstrap/config"
)

// Reason categories of a connection failure (ConnError.Reason); they are
// the "reason" of a dependency in the /readyz detail.
const (
	ReasonTLS        = "tls"
	ReasonConnection = "connection"
)

// ConnError explains a failure to reach a Redis endpoint: which
// configuration variable is most likely at fault and why. It wraps the
// connection error. Its text holds variable names and certificate facts,
// never a secret.
type ConnError struct {
	// Var is the variable at fault, e.g. APP_RATE_LIMIT_REDIS_TLS_CA_FILE.
	Var string
	// Reason is ReasonTLS or ReasonConnection.
	Reason string
	// Hint says what is wrong and what to change.
	Hint string
	// Err is the underlying error.
	Err error
}

func (e *ConnError) Error() string { return e.Var + ": " + e.Hint + ": " + e.Err.Error() }

// Unwrap returns the underlying error.
func (e *ConnError) Unwrap() error { return e.Err }

// ExplainConnError returns err wrapped in a *ConnError when it is a
// connection failure whose cause a configuration variable of the endpoint
// (prefix is e.g. "APP_RATE_LIMIT_REDIS_") explains, and err unchanged
// otherwise. It recognizes: a server certificate from an unknown CA, for
// another name, expired or not yet valid; a client certificate the server
// requires or refuses; TLS spoken to a plaintext port; plaintext spoken to
// a TLS port.
func ExplainConnError(prefix string, r config.Redis, err error) error {
	if err == nil {
		return nil
	}
	var (
		ce   *ConnError
		uae  x509.UnknownAuthorityError
		he   x509.HostnameError
		cie  x509.CertificateInvalidError
		rhe  tls.RecordHeaderError
		tlsV = r.TLS.Enabled
	)
	explained := func(v, reason, format string, args ...any) error {
		return &ConnError{Var: prefix + v, Reason: reason, Hint: fmt.Sprintf(format, args...), Err: err}
	}
	switch {
	case errors.As(err, &ce):
		return err
	case errors.As(err, &uae):
		return explained("TLS_CA_FILE", ReasonTLS, "the server's certificate is not signed by a trusted CA (%s)", caSource(prefix, r))
	case errors.As(err, &he):
		return explained("TLS_SERVER_NAME", ReasonTLS, "the server's certificate is not valid for the name checked (%s); set it to a name the certificate holds", serverNameSource(prefix, r))
	case errors.As(err, &cie) && cie.Reason == x509.Expired:
		return explained("ADDR", ReasonTLS, "the server at %s presents a certificate that is expired or not yet valid; renew it on the server", r.Addr)
	case errors.As(err, &cie):
		return explained("TLS_CA_FILE", ReasonTLS, "the server's certificate chain is not acceptable")
	case tlsV && remoteAlert(err):
		return explained("TLS_CERT_FILE", ReasonTLS, "the server refused the client certificate (%s); it requires one signed by a CA it trusts", clientCertState(prefix, r))
	case tlsV && errors.As(err, &rhe):
		return explained("TLS_ENABLED", ReasonTLS, "the server at %s does not speak TLS; point %sADDR at its tls-port or set %sTLS_ENABLED=false", r.Addr, prefix, prefix)
	case tlsV && errors.Is(err, redisrate.ErrTLSHandshake) && errors.Is(err, context.DeadlineExceeded):
		return explained("TLS_ENABLED", ReasonTLS, "no TLS handshake from %s within the dial timeout; is it a plaintext port?", r.Addr)
	case tlsV && r.TLS.CertFile == "" && dropped(err):
		return explained("TLS_CERT_FILE", ReasonTLS, "the server closed the connection right after the TLS handshake; it probably requires a client certificate (%sTLS_CERT_FILE and %sTLS_KEY_FILE are unset)", prefix, prefix)
	case !tlsV && dropped(err):
		return explained("TLS_ENABLED", ReasonTLS, "the server at %s closed the connection during the handshake; if it speaks TLS only, set %sTLS_ENABLED=true", r.Addr, prefix)
	}
	return err
}

// remoteAlert reports whether err is a TLS alert the server sent about the
// client's certificate.
func remoteAlert(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "remote error: tls: certificate required") ||
		strings.Contains(msg, "remote error: tls: bad certificate") ||
		strings.Contains(msg, "remote error: tls: unknown certificate authority") ||
		strings.Contains(msg, "remote error: tls: expired certificate")
}

// dropped reports whether err is the peer closing or resetting the
// connection.
func dropped(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)
}

func caSource(prefix string, r config.Redis) string {
	if r.TLS.CAFile == "" {
		return "the system roots; " + prefix + "TLS_CA_FILE is unset"
	}
	return "the CAs in " + r.TLS.CAFile
}

func serverNameSource(prefix string, r config.Redis) string {
	if r.TLS.ServerName == "" {
		return "the host of " + prefix + "ADDR, " + hostOf(r.Addr)
	}
	return fmt.Sprintf("%q", r.TLS.ServerName)
}

func clientCertState(prefix string, r config.Redis) string {
	if r.TLS.CertFile == "" {
		return prefix + "TLS_CERT_FILE is unset"
	}
	return "the certificate in " + r.TLS.CertFile
}

func hostOf(addr string) string {
	if i := strings.LastIndexByte(addr, ':'); i >= 0 {
		return strings.Trim(addr[:i], "[]")
	}
	return addr
}
