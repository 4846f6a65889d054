package redisclient

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"testing"
	"time"

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
