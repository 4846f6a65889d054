package redisclient

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
)

// listen starts a loopback listener whose every connection is handed to
// serve; it is closed with the test.
func listen(t *testing.T, serve func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			serve(c)
		}
	}()
	t.Cleanup(func() { _ = ln.Close(); <-done })
	return ln.Addr().String()
}

func TestDialerMarksEveryDialFailure(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close()) // nothing listens there now

	t.Run("refused", func(t *testing.T) {
		_, err := newDialer(nil, time.Second, nil)(context.Background(), "tcp", addr)
		var de *DialError
		require.ErrorAs(t, err, &de)
		var oe *net.OpError
		require.ErrorAs(t, err, &oe)
		assert.Equal(t, "dial", oe.Op)
	})
	t.Run("custom dialer", func(t *testing.T) {
		boom := errors.New("boom")
		_, err := newDialer(func(context.Context, string, string) (net.Conn, error) { return nil, boom }, time.Second, nil)(context.Background(), "tcp", addr)
		var de *DialError
		require.ErrorAs(t, err, &de)
		assert.ErrorIs(t, err, boom)
	})
	t.Run("tls handshake with a plaintext server", func(t *testing.T) {
		plain := listen(t, func(c net.Conn) { _, _ = c.Write([]byte("-ERR not tls\r\n")); _ = c.Close() })
		_, err := newDialer(nil, time.Second, tlsConfig(&tls.Config{ServerName: "x"}))(context.Background(), "tcp", plain)
		var de *DialError
		require.ErrorAs(t, err, &de, "a failed handshake is a dial failure")
		assert.ErrorIs(t, err, ErrTLSHandshake)
	})
	t.Run("dial timeout bounds a custom dialer", func(t *testing.T) {
		_, err := newDialer(func(ctx context.Context, _, _ string) (net.Conn, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		}, 20*time.Millisecond, nil)(context.Background(), "tcp", addr)
		var de *DialError
		require.ErrorAs(t, err, &de)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
	})
}

// TestDialerChecksEachHostAgainstItsOwnName: with no ServerName set, the
// certificate is checked against the dialed host (a topology dials many),
// so a certificate for "localhost" is accepted at localhost and refused at
// 127.0.0.1, through a custom dialer too.
func TestDialerChecksEachHostAgainstItsOwnName(t *testing.T) {
	ca := redistest.NewCA(t)
	cert := ca.Issue(t, "server", redistest.CertOptions{DNSNames: []string{"localhost"}, Server: true})
	srvConf := &tls.Config{Certificates: []tls.Certificate{cert.TLS}, MinVersion: tls.VersionTLS12}
	addr := listen(t, func(c net.Conn) {
		tc := tls.Server(c, srvConf)
		_ = tc.SetDeadline(time.Now().Add(2 * time.Second))
		_ = tc.Handshake()
		_ = tc.Close()
	})
	_, port, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	client := tlsConfig(&tls.Config{RootCAs: ca.Pool()})
	var d net.Dialer
	toLoopback := func(ctx context.Context, network, _ string) (net.Conn, error) {
		return d.DialContext(ctx, network, addr)
	}

	for _, base := range []DialFunc{nil, toLoopback} {
		dial := newDialer(base, 2*time.Second, client)
		conn, err := dial(context.Background(), "tcp", net.JoinHostPort("localhost", port))
		require.NoError(t, err, "the certificate names localhost")
		_ = conn.Close()

		_, err = dial(context.Background(), "tcp", addr)
		require.ErrorIs(t, err, ErrTLSHandshake, "the certificate does not name 127.0.0.1")
		var de *DialError
		require.ErrorAs(t, err, &de)
	}
	assert.Equal(t, "", client.ServerName, "the configuration shared by every host is untouched")
}

// TestDialCircuit: the own dial circuit (Profile.OwnDialFailures) refuses
// a dial without dialing only after threshold dials in a row failed, with
// the last failure, lets one probe through per dialProbeInterval, and
// closes on any successful dial; failures never add up across a success.
// Every failure reaches go-redis as a connection that fails its first
// write with a *DialError, never as an error.
func TestDialCircuit(t *testing.T) {
	var down bool
	var dials int
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	client := okConn{}
	c := newDialCircuit(func(context.Context, string, string) (net.Conn, error) {
		dials++
		if down {
			return nil, &DialError{Err: refused}
		}
		return client, nil
	}, 3)
	now := time.Unix(1000, 0)
	c.now = func() time.Time { return now }
	dial := func() (net.Conn, error) {
		conn, err := c.DialContext(context.Background(), "tcp", "a:1")
		require.NoError(t, err, "never an error: go-redis would count it")
		_, werr := conn.Write([]byte("x"))
		return conn, werr
	}
	failed := func(msg string) {
		t.Helper()
		_, err := dial()
		var de *DialError
		require.ErrorAs(t, err, &de, msg)
		require.ErrorIs(t, err, syscall.ECONNREFUSED, msg)
	}

	// Failures that are not in a row never open it.
	for range 10 {
		down = true
		failed("a failure")
		failed("a failure")
		down = false
		conn, err := dial()
		require.NoError(t, err)
		require.Equal(t, client, conn, "a successful dial is the server's connection")
	}
	require.Equal(t, 30, dials, "every dial was real")

	// Three in a row open it: refused without dialing, with the last failure.
	down = true
	for range 3 {
		failed("a failure")
	}
	failed("refused while open")
	require.Equal(t, 33, dials, "refused without dialing")
	down = false
	failed("refused until the next probe, though the server is back")
	require.Equal(t, 33, dials)
	// One probe per interval: it reaches the server and closes the circuit.
	now = now.Add(dialProbeInterval)
	_, err := dial()
	require.NoError(t, err)
	require.Equal(t, 34, dials)
	down = true
	failed("closed: a real dial")
	require.Equal(t, 35, dials)

	// Per address: another address is not refused.
	failed("a failure")
	failed("a failure: open again")
	failed("refused while open")
	require.Equal(t, 37, dials)
	other, err := c.DialContext(context.Background(), "tcp", "b:1")
	require.NoError(t, err)
	_, err = other.Write([]byte("x"))
	require.Error(t, err)
	require.Equal(t, 38, dials, "another address is dialed")
}

// TestOwnDialFailuresThroughGoRedis: under Profile.OwnDialFailures a
// refused dial still fails its command with a *DialError (the cause kept)
// before anything is written, go-redis keeps no connection of it, and the
// client dials the server once it accepts. (TestDialCircuit has the
// circuit; redisrate TestLostReplyRetryAfterDialFailures what go-redis's
// own would do.)
func TestOwnDialFailuresThroughGoRedis(t *testing.T) {
	srv := redistest.Start(t)
	const poolSize = 4
	var down atomic.Bool
	var d net.Dialer
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	o := Options{
		Protocol: 2, DialTimeout: time.Second, CommandTimeout: time.Second, PoolSize: poolSize, PoolTimeout: time.Second,
		Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if down.Load() {
				return nil, refused
			}
			return d.DialContext(ctx, network, addr)
		},
		Profile: Profile{OwnDialFailures: true, ProbeOnConnect: true},
	}
	client := redis.NewClient(o.Simple(srv.Addr()))
	t.Cleanup(func() { _ = client.Close() })
	ctx := redistest.AdminCtx(t)

	down.Store(true)
	for range poolSize - 1 {
		err := client.Ping(ctx).Err()
		var de *DialError
		require.ErrorAs(t, err, &de, "a failed dial is a *DialError: %v", err)
		require.ErrorIs(t, err, syscall.ECONNREFUSED)
	}
	assert.Zero(t, client.PoolStats().TotalConns, "no connection kept")
	down.Store(false)
	require.NoError(t, client.Ping(ctx).Err(), "the server is dialed once it accepts")
}

// okConn is a connection whose writes succeed.
type okConn struct{ net.Conn }

func (okConn) Write(b []byte) (int, error) { return len(b), nil }
