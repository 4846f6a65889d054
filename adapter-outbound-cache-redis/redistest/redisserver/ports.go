package redisserver

import (
	"errors"
	"fmt"
	"net"
)

// OnFreePort calls start with a free loopback port until it returns nil or
// an error that does not wrap ErrAddrInUse, at most BindAttempts times: it
// is the one retry of a port taken between choosing it and binding it.
func OnFreePort(start func(port int) error) error {
	for attempt := 1; ; attempt++ {
		port, err := pickPort()
		if err != nil {
			return err
		}
		err = start(port)
		if err == nil || !errors.Is(err, ErrAddrInUse) || attempt == BindAttempts {
			return err
		}
	}
}

// pickPort chooses a port for a server to bind; tests replace it to force
// a collision.
var pickPort = FreePort

// pickPortOtherThan is pickPort, never returning taken (the kernel may hand
// out a port again once its probe listener is closed). It gives up after
// BindAttempts picks.
func pickPortOtherThan(taken int) (int, error) {
	for range BindAttempts {
		port, err := pickPort()
		if err != nil || port != taken {
			return port, err
		}
	}
	return 0, fmt.Errorf("redisserver: no free port other than %d in %d picks", taken, BindAttempts)
}

// FreePort asks the kernel for a free loopback port. Another process may
// take it before the server binds it; Launch retries.
func FreePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("redisserver: pick a free port: %w", err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	if err := ln.Close(); err != nil {
		return 0, fmt.Errorf("redisserver: release port %d: %w", port, err)
	}
	return port, nil
}
