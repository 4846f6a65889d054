package redisclient

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrTLSHandshake is wrapped by every failed TLS handshake of the dialer
// (with the crypto/tls or crypto/x509 error alongside), so that a caller can
// tell a TLS problem (wrong CA, server name, expired certificate, a
// plaintext port) from an unreachable server.
var ErrTLSHandshake = errors.New("tls handshake")

// DialError marks an error that came out of the dialer. A dial happens
// before any command byte is written on the new connection, so for the
// command waiting on it nothing was sent.
type DialError struct{ Err error }

func (e *DialError) Error() string { return "redis dial: " + e.Err.Error() }

// Unwrap exposes the dialer's error.
func (e *DialError) Unwrap() error { return e.Err }

// probeConn is the last step of a new connection's handshake under
// Profile.ProbeOnConnect: a PING. go-redis tolerates an error reply to
// HELLO (it falls back to RESP2), so a server that greets with "ERR max
// number of clients reached" and closes, or that requires AUTH when no
// password is configured, would otherwise first fail on the first command,
// after it was written. With the probe that failure happens during the
// handshake, before anything of the command is serialized.
func probeConn(ctx context.Context, cn *redis.Conn) error {
	return cn.Ping(ctx).Err()
}

// tlsConfig returns the dialer's TLS configuration: a clone of c with
// MinVersion at least TLS 1.2; nil without TLS. An empty ServerName stays
// empty: the dialer names each dialed host (tlsForHost).
func tlsConfig(c *tls.Config) *tls.Config {
	if c == nil {
		return nil
	}
	c = c.Clone()
	if c.MinVersion == 0 {
		c.MinVersion = tls.VersionTLS12
	}
	return c
}

// newDialer returns the go-redis Dialer: base (or a net.Dialer with TCP
// keep-alive) bounded by timeout, then the TLS handshake when tlsConfig is
// set, every failure wrapped in *DialError.
func newDialer(base DialFunc, timeout time.Duration, tlsConfig *tls.Config) DialFunc {
	if base == nil {
		d := &net.Dialer{
			Timeout: timeout,
			KeepAliveConfig: net.KeepAliveConfig{
				Enable: true, Idle: 30 * time.Second, Interval: 5 * time.Second, Count: 3,
			},
		}
		base = d.DialContext
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		conn, err := base(ctx, network, addr)
		if err != nil {
			return nil, &DialError{Err: err}
		}
		if tlsConfig == nil {
			return conn, nil
		}
		tc := tls.Client(conn, tlsForHost(tlsConfig, addr))
		if err := tc.HandshakeContext(ctx); err != nil {
			_ = conn.Close()
			return nil, &DialError{Err: fmt.Errorf("%w: %w", ErrTLSHandshake, err)}
		}
		return tc, nil
	}
}

// tlsForHost returns c, or when c names no server a clone whose ServerName
// is addr's host (as crypto/tls's Dial does), so that every node of a
// topology is checked against its own name.
func tlsForHost(c *tls.Config, addr string) *tls.Config {
	if c.ServerName != "" {
		return c
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	c = c.Clone()
	c.ServerName = host
	return c
}
