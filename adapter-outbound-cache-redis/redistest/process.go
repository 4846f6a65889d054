package redistest

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"testing"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest/redisserver"
)

// processLane runs redis-server from PATH as a child process, through the
// one launcher (package redisserver).
type processLane struct {
	proc  *redisserver.Process
	clock *Clock // WithClock; nil otherwise
}

var _ lane = (*processLane)(nil)

// startProcess starts redis-server on a free port (redisserver's one
// port-retry helper); missing is set when redis-server is not on PATH.
func startProcess(t testing.TB, cfg *config) (l lane, missing string, err error) {
	t.Helper()
	dir := t.TempDir()
	var clock *Clock
	var env []string
	if cfg.clock {
		var missing string
		if clock, env, missing, err = newClock(dir); missing != "" || err != nil {
			return nil, missing, err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	proc, err := redisserver.Launch(ctx, redisserver.Config{
		Dir:     dir,
		Args:    processArgs(cfg),
		TLS:     cfg.probeTLS(),
		Cluster: cfg.clusterNode,
		Env:     env,
	})
	if errors.Is(err, redisserver.ErrNotFound) {
		return nil, "redis-server not on PATH", nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("redistest: %w", err)
	}
	return &processLane{proc: proc, clock: clock}, "", nil
}

// processArgs is the command line after redisserver.DefaultArgs (no
// persistence, loopback only): TLS, then the caller's directives.
func processArgs(cfg *config) []string {
	var args []string
	if cfg.tls != nil {
		args = append(args, cfg.tls.args()...)
	}
	for _, d := range cfg.directives {
		args = append(args, "--"+d.name, d.value)
	}
	return args
}

func (p *processLane) name() string { return LaneProcess }
func (p *processLane) addr() string { return p.proc.Addr() }
func (p *processLane) caps() map[Capability]bool {
	return map[Capability]bool{CapKill: true, CapRestart: true, CapPause: true, CapReplicate: true}
}

func (p *processLane) pid() int { return p.proc.PID() }

// stop kills the running child, if any, and waits until it is reaped.
func (p *processLane) stop() { p.proc.Kill() }

func (p *processLane) kill() error {
	if !p.proc.Running() {
		return redisserver.ErrNotRunning
	}
	p.stop()
	return nil
}

func (p *processLane) restart(ctx context.Context) error { return p.proc.Restart(ctx) }

func (p *processLane) pause() error  { return p.proc.Signal(syscall.SIGSTOP) }
func (p *processLane) resume() error { return p.proc.Signal(syscall.SIGCONT) }

func (p *processLane) close() error {
	p.stop()
	return nil
}

func (p *processLane) logTail() string { return p.proc.LogTail() }

func tailSuffix(tail string) string {
	if tail == "" {
		return ""
	}
	return "\n--- server log (tail) ---\n" + tail
}
