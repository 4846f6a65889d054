package redisrate

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/internal/certainty"
)

// probeConn is the last step of every new connection's handshake: a PING.
// go-redis tolerates an error reply to HELLO (it falls back to RESP2), so a
// server that greets with "ERR max number of clients reached" and closes, or
// that requires AUTH when no password is configured, would otherwise first
// fail on the program call, after it was written (Indeterminate). With the
// probe that failure happens during the handshake, before anything of the
// call is serialized (Unavailable).
func probeConn(ctx context.Context, cn *redis.Conn) error {
	return cn.Ping(ctx).Err()
}

// tlsFor returns the TLS configuration the dialer uses: a clone of
// cfg.TLSConfig with MinVersion at least TLS 1.2 and ServerName defaulting
// to Addr's host; nil without TLS.
func tlsFor(cfg ClientConfig) *tls.Config {
	if cfg.TLSConfig == nil {
		return nil
	}
	c := cfg.TLSConfig.Clone()
	if c.MinVersion == 0 {
		c.MinVersion = tls.VersionTLS12
	}
	if c.ServerName == "" {
		host, _, _ := net.SplitHostPort(cfg.Addr)
		c.ServerName = host
	}
	return c
}

// newDialer returns the go-redis Dialer of the coordination client: base (or
// a net.Dialer with TCP keep-alive) bounded by timeout, then the TLS
// handshake when tlsConfig is set, every failure wrapped in *certainty.DialError.
func newDialer(base func(ctx context.Context, network, addr string) (net.Conn, error), timeout time.Duration, tlsConfig *tls.Config) func(ctx context.Context, network, addr string) (net.Conn, error) {
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
			return nil, &certainty.DialError{Err: err}
		}
		if tlsConfig == nil {
			return conn, nil
		}
		tc := tls.Client(conn, tlsForHost(tlsConfig, addr))
		if err := tc.HandshakeContext(ctx); err != nil {
			_ = conn.Close()
			return nil, &certainty.DialError{Err: fmt.Errorf("%w: %w", ErrTLSHandshake, err)}
		}
		return tc, nil
	}
}

// tlsForHost returns c, or when c names no server (a topology client
// dialing several hosts) a clone whose ServerName is addr's host.
func tlsForHost(c *tls.Config, addr string) *tls.Config {
	if c.ServerName != "" || c.InsecureSkipVerify {
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
