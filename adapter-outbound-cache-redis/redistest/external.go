package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
)

// externalLane is a dedicated test server someone else runs. redistest
// never flushes, kills or reconfigures it.
type externalLane struct{ address string }

var _ lane = (*externalLane)(nil)

// ErrNotLoopback is returned for a REDIS_TEST_ADDR outside 127.0.0.0/8 and ::1.
var ErrNotLoopback = errors.New("not a loopback address")

// newExternal validates addr and returns the external lane.
func newExternal(addr string) (lane, error) {
	if err := checkExternalAddr(addr); err != nil {
		return nil, err
	}
	return &externalLane{address: addr}, nil
}

// checkExternalAddr accepts only a literal loopback IP with a port:
// 127.0.0.0/8 or ::1. Host names are refused because what they resolve to
// is outside the test's control.
func checkExternalAddr(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("redistest: %s=%q: want ip:port: %w", EnvAddr, addr, err)
	}
	if port == "" {
		return fmt.Errorf("redistest: %s=%q: empty port", EnvAddr, addr)
	}
	ip, err := netip.ParseAddr(host)
	if err != nil || ip.Zone() != "" {
		return fmt.Errorf("redistest: %s=%q: host %q must be a literal IP in 127.0.0.0/8 or ::1: %w", EnvAddr, addr, host, ErrNotLoopback)
	}
	if !ip.Unmap().IsLoopback() {
		return fmt.Errorf("redistest: %s=%q: %s is outside 127.0.0.0/8 and ::1; redistest only talks to a dedicated loopback test server: %w", EnvAddr, addr, ip, ErrNotLoopback)
	}
	if strings.HasPrefix(port, "0") || port == "0" {
		return fmt.Errorf("redistest: %s=%q: invalid port %q", EnvAddr, addr, port)
	}
	return nil
}

func (e *externalLane) name() string                  { return LaneExternal }
func (e *externalLane) addr() string                  { return e.address }
func (e *externalLane) caps() map[Capability]bool     { return nil }
func (e *externalLane) kill() error                   { return errNoControl }
func (e *externalLane) restart(context.Context) error { return errNoControl }
func (e *externalLane) pause() error                  { return errNoControl }
func (e *externalLane) resume() error                 { return nil }
func (e *externalLane) close() error                  { return nil }
func (e *externalLane) logTail() string               { return "" }
func (e *externalLane) pid() int                      { return 0 }

var errNoControl = errors.New("the external lane has no fault controls")
