package redisclient

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
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

// dialProbeInterval is how often an open dial circuit lets one real dial
// through: go-redis's own probe interval, so that the bound on dials to an
// unreachable server is the one go-redis's circuit gave.
const dialProbeInterval = time.Second

// dialCircuit is the capability's own dial circuit (Profile.OwnDialFailures),
// which replaces go-redis's. Per address, once threshold dials in a row
// have failed, a dial is refused without dialing, with the last failure,
// except one real dial (a probe) per dialProbeInterval; any successful dial
// closes it. go-redis's circuit counts failures over the pool's whole life
// and only its own probe resets the count, so a history of PoolSize
// failures, spread over outages and restarts, refuses dials to a healthy
// server with a stale error (issue 33). To keep go-redis's count at zero,
// a failed or refused dial reaches go-redis as a failedConn, not an error:
// its handshake's first write fails with the *DialError (dialFailure),
// before any byte of a command, and go-redis closes and removes it like
// any connection whose handshake failed.
type dialCircuit struct {
	dial      DialFunc
	threshold int
	now       func() time.Time

	mu    sync.Mutex
	addrs map[string]*dialState
}

// dialState is one address's circuit.
type dialState struct {
	failures int        // dials failed in a row; 0 after a success
	last     *DialError // the last failure
	probeAt  time.Time  // the last real dial while open
}

func newDialCircuit(dial DialFunc, threshold int) *dialCircuit {
	return &dialCircuit{dial: dial, threshold: max(threshold, 1), now: time.Now, addrs: map[string]*dialState{}}
}

// DialContext is the go-redis Dialer; it never returns an error.
func (c *dialCircuit) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	c.mu.Lock()
	s := c.addrs[addr]
	if s == nil {
		s = &dialState{}
		c.addrs[addr] = s
	}
	if s.failures >= c.threshold {
		if c.now().Sub(s.probeAt) < dialProbeInterval {
			last := s.last
			c.mu.Unlock()
			return failedConn{err: &dialFailure{last}}, nil
		}
		s.probeAt = c.now() // this dial is the probe
	}
	c.mu.Unlock()
	conn, err := c.dial(ctx, network, addr)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err == nil {
		s.failures = 0
		return conn, nil
	}
	de, ok := errors.AsType[*DialError](err)
	if !ok {
		de = &DialError{Err: err}
	}
	s.failures++
	s.last = de
	if s.failures == c.threshold {
		s.probeAt = c.now()
	}
	return failedConn{err: &dialFailure{de}}, nil
}

// dialFailure is a failedConn's error: the dial's *DialError, which it
// unwraps to in one step (go-redis unwraps a handshake error once before
// returning it).
type dialFailure struct{ *DialError }

// Unwrap exposes the dial's error.
func (e *dialFailure) Unwrap() error { return e.DialError }

// failedConn is the connection of a failed or refused dial: every read and
// write fails with its error; closing it is a no-op.
type failedConn struct{ err error }

var failedAddr net.Addr = &net.TCPAddr{}

func (c failedConn) Read([]byte) (int, error)      { return 0, c.err }
func (c failedConn) Write([]byte) (int, error)     { return 0, c.err }
func (failedConn) Close() error                    { return nil }
func (failedConn) LocalAddr() net.Addr             { return failedAddr }
func (failedConn) RemoteAddr() net.Addr            { return failedAddr }
func (failedConn) SetDeadline(time.Time) error     { return nil }
func (failedConn) SetReadDeadline(time.Time) error { return nil }
func (failedConn) SetWriteDeadline(time.Time) error {
	return nil
}
