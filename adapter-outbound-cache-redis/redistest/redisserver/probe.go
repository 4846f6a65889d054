package redisserver

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// WaitPing polls addr with Ping every 20ms until it answers +PONG, ctx ends,
// or exited is closed (the server died).
func WaitPing(ctx context.Context, addr string, exited <-chan struct{}) error {
	return waitPing(ctx, addr, exited, nil)
}

// waitPing is WaitPing, over TLS when tlsConfig is set.
func waitPing(ctx context.Context, addr string, exited <-chan struct{}, tlsConfig *tls.Config) error {
	var last error
	for {
		select {
		case <-exited:
			return fmt.Errorf("server exited before answering PING on %s", addr)
		default:
		}
		if last = ping(ctx, addr, tlsConfig); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no PONG from %s: %w (last: %w)", addr, ctx.Err(), last)
		case <-exited:
			return fmt.Errorf("server exited before answering PING on %s", addr)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Ping sends one RESP PING on a fresh connection and expects +PONG; no
// client library, so no background goroutines.
func Ping(ctx context.Context, addr string) error { return ping(ctx, addr, nil) }

// ping is Ping, over TLS when tlsConfig is set.
func ping(ctx context.Context, addr string, tlsConfig *tls.Config) error {
	conn, r, err := dial(ctx, addr, tlsConfig)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "*1\r\n$4\r\nPING\r\n"); err != nil {
		return err
	}
	line, err := r.ReadString('\n')
	if err != nil {
		return err
	}
	if line != "+PONG\r\n" {
		return fmt.Errorf("PING reply %q", strings.TrimSpace(line))
	}
	return nil
}

// maxInfoLen bounds the INFO reply Info accepts.
const maxInfoLen = 1 << 20

// Info sends INFO section on a fresh connection and returns the reply text.
func Info(ctx context.Context, addr, section string) (string, error) {
	return info(ctx, addr, section, nil)
}

// info is Info, over TLS when tlsConfig is set.
func info(ctx context.Context, addr, section string, tlsConfig *tls.Config) (string, error) {
	conn, r, err := dial(ctx, addr, tlsConfig)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	if _, err := fmt.Fprintf(conn, "*2\r\n$4\r\nINFO\r\n$%d\r\n%s\r\n", len(section), section); err != nil {
		return "", err
	}
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(line, "$"), "\r\n"))
	if !strings.HasPrefix(line, "$") || err != nil || n < 0 || n > maxInfoLen {
		return "", fmt.Errorf("INFO %s reply %q", section, strings.TrimSpace(line))
	}
	b := make([]byte, n+2)
	if _, err := io.ReadFull(r, b); err != nil {
		return "", fmt.Errorf("INFO %s reply: %w", section, err)
	}
	return string(b[:n]), nil
}

// dial opens a connection with a 500ms dial bound (including the TLS
// handshake when tlsConfig is set) and a 1s I/O deadline.
func dial(ctx context.Context, addr string, tlsConfig *tls.Config) (net.Conn, *bufio.Reader, error) {
	var (
		conn net.Conn
		err  error
	)
	if tlsConfig != nil {
		d := tls.Dialer{NetDialer: &net.Dialer{Timeout: 500 * time.Millisecond}, Config: tlsConfig}
		conn, err = d.DialContext(ctx, "tcp", addr)
	} else {
		d := net.Dialer{Timeout: 500 * time.Millisecond}
		conn, err = d.DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		return nil, nil, err
	}
	if err := conn.SetDeadline(time.Now().Add(time.Second)); err != nil {
		_ = conn.Close()
		return nil, nil, err
	}
	return conn, bufio.NewReader(conn), nil
}
