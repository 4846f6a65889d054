package redistest

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest/redisserver"
)

// bindAttempts bounds the retries when a free port is taken between
// choosing it and redis-server binding it.
const bindAttempts = redisserver.BindAttempts

// processLane runs redis-server from PATH as a child process, through the
// one launcher (package redisserver).
type processLane struct {
	bin     string
	args    []string // everything except --port
	logPath string
	port    int
	// tls, for a server started WithTLS, is the client configuration of
	// the start-up probes; the port is then the tls-port.
	tls *tls.Config

	proc *redisserver.Process // nil when not running
}

var _ lane = (*processLane)(nil)

// startProcess starts redis-server; missing is set when redis-server is not
// on PATH.
func startProcess(t testing.TB, cfg *config) (l lane, missing string, err error) {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, "redis-server not on PATH", nil
	}
	dir := t.TempDir()
	p := &processLane{
		bin:     bin,
		logPath: filepath.Join(dir, "redis.log"),
		tls:     cfg.probeTLS(),
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	for attempt := 1; ; attempt++ {
		// Every port is chosen again on every attempt: a port another
		// process took between our choice and the bind stays taken.
		p.port, err = pickPort()
		if err != nil {
			return nil, "", err
		}
		p.args = processArgs(dir, cfg)
		if cfg.clusterBus {
			bus, err := pickPortOtherThan(p.port)
			if err != nil {
				return nil, "", err
			}
			p.args = append(p.args, "--cluster-port", strconv.Itoa(bus))
			// A failed attempt may have written nodes.conf with its ports.
			if err := os.Remove(filepath.Join(dir, clusterConfigFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return nil, "", fmt.Errorf("redistest: remove the failed attempt's %s: %w", clusterConfigFile, err)
			}
		}
		err = p.start(ctx)
		if err == nil {
			return p, "", nil
		}
		if !errors.Is(err, errAddrInUse) || attempt == bindAttempts {
			return nil, "", fmt.Errorf("redistest: start %s: %w%s", bin, err, tailSuffix(p.logTail()))
		}
	}
}

// processArgs is the command line minus --port: redisserver.DefaultArgs
// (no persistence, loopback only), then the caller's directives.
func processArgs(dir string, cfg *config) []string {
	args := redisserver.DefaultArgs(dir)
	if cfg.tls != nil {
		args = append(args, cfg.tls.args()...)
	}
	for _, d := range cfg.directives {
		args = append(args, "--"+d.name, d.value)
	}
	return args
}

// pickPort chooses a port for a server to bind; tests replace it to force a
// collision.
var pickPort = freePort

// pickPortOtherThan is pickPort, never returning taken (the kernel may hand
// out a port again once its probe listener is closed). It gives up after
// bindAttempts picks.
func pickPortOtherThan(taken int) (int, error) {
	for range bindAttempts {
		port, err := pickPort()
		if err != nil || port != taken {
			return port, err
		}
	}
	return 0, fmt.Errorf("redistest: no free port other than %d in %d picks", taken, bindAttempts)
}

// freePort asks the kernel for a free loopback port (redisserver.FreePort).
func freePort() (int, error) {
	port, err := redisserver.FreePort()
	if err != nil {
		return 0, fmt.Errorf("redistest: %w", err)
	}
	return port, nil
}

var errAddrInUse = redisserver.ErrAddrInUse

// start launches redis-server on p.port and waits until it answers PING.
func (p *processLane) start(ctx context.Context) error {
	proc := &redisserver.Process{Bin: p.bin, Args: p.args, LogPath: p.logPath, Port: p.port, TLS: p.tls}
	if err := proc.Start(ctx); err != nil {
		return err
	}
	p.proc = proc
	return nil
}

// stop kills the running child, if any, and waits until it is reaped.
func (p *processLane) stop() {
	if p.proc == nil {
		return
	}
	p.proc.Kill()
	p.proc = nil
}

func (p *processLane) name() string { return LaneProcess }
func (p *processLane) addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(p.port)) }
func (p *processLane) caps() map[Capability]bool {
	return map[Capability]bool{CapKill: true, CapRestart: true, CapPause: true, CapReplicate: true}
}

func (p *processLane) pid() int {
	if p.proc == nil {
		return 0
	}
	return p.proc.PID()
}

func (p *processLane) kill() error {
	if p.proc == nil {
		return redisserver.ErrNotRunning
	}
	p.stop()
	return nil
}

func (p *processLane) restart(ctx context.Context) error {
	p.stop()
	var err error
	// The port was ours a moment ago; a bind failure here is a transient
	// race with another process, so retry the same port briefly.
	for attempt := 1; attempt <= bindAttempts; attempt++ {
		if err = p.start(ctx); !errors.Is(err, errAddrInUse) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %w)", ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
	return err
}

func (p *processLane) signal(sig syscall.Signal) error {
	if p.proc == nil {
		return redisserver.ErrNotRunning
	}
	return p.proc.Signal(sig)
}

func (p *processLane) pause() error  { return p.signal(syscall.SIGSTOP) }
func (p *processLane) resume() error { return p.signal(syscall.SIGCONT) }

func (p *processLane) close() error {
	p.stop()
	return nil
}

func (p *processLane) logTail() string { return redisserver.FileTail(p.logPath) }

// waitPing polls addr with a raw PING until it answers +PONG, ctx ends, or
// exited is closed (the server died); see redisserver.WaitPing.
func waitPing(ctx context.Context, addr string, exited <-chan struct{}) error {
	return redisserver.WaitPing(ctx, addr, exited)
}

func tailSuffix(tail string) string {
	if tail == "" {
		return ""
	}
	return "\n--- server log (tail) ---\n" + tail
}
