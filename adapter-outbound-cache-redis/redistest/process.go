package redistest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// bindAttempts bounds the retries when a free port is taken between
// choosing it and redis-server binding it.
const bindAttempts = 5

// processLane runs redis-server from PATH as a child process.
type processLane struct {
	bin     string
	args    []string // everything except --port
	logPath string
	port    int

	cmd  *exec.Cmd     // nil when not running
	done chan struct{} // closed once cmd has been reaped
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
		args:    processArgs(dir, cfg),
		logPath: filepath.Join(dir, "redis.log"),
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	for attempt := 1; ; attempt++ {
		p.port, err = freePort()
		if err != nil {
			return nil, "", err
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

// processArgs is the command line minus --port: no persistence, loopback
// only, then the caller's directives.
func processArgs(dir string, cfg *config) []string {
	args := []string{
		"--save", "",
		"--appendonly", "no",
		"--dir", dir,
		"--bind", "127.0.0.1",
		"--protected-mode", "yes",
		"--daemonize", "no",
		"--logfile", "",
	}
	for _, d := range cfg.directives {
		args = append(args, "--"+d.name, d.value)
	}
	return args
}

// freePort asks the kernel for a free loopback port. Another process may
// take it before redis-server binds it; the caller retries.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("redistest: pick a free port: %w", err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	if err := ln.Close(); err != nil {
		return 0, fmt.Errorf("redistest: release port %d: %w", port, err)
	}
	return port, nil
}

var errAddrInUse = errors.New("address already in use")

// start launches redis-server on p.port and waits until it answers PING.
func (p *processLane) start(ctx context.Context) error {
	logf, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("open server log: %w", err)
	}
	defer logf.Close() // the child holds its own descriptor
	fmt.Fprintf(logf, "--- redistest: starting on 127.0.0.1:%d at %s\n", p.port, time.Now().Format(time.RFC3339Nano))

	cmd := exec.Command(p.bin, append(append([]string(nil), p.args...), "--port", strconv.Itoa(p.port))...)
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("exec: %w", err)
	}
	done := make(chan struct{})
	go func() { // ends when the child exits; close waits for it
		_ = cmd.Wait()
		close(done)
	}()
	p.cmd, p.done = cmd, done

	if err := waitPing(ctx, p.addr(), done); err != nil {
		exited := false
		select {
		case <-done:
			exited = true
		default:
		}
		p.stop()
		if exited && strings.Contains(p.logTail(), "Address already in use") {
			return fmt.Errorf("port %d: %w", p.port, errAddrInUse)
		}
		return err
	}
	return nil
}

// stop kills the running child, if any, and waits until it is reaped.
func (p *processLane) stop() {
	if p.cmd == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL) // fails only if already exited
	<-p.done
	p.cmd, p.done = nil, nil
}

func (p *processLane) name() string { return LaneProcess }
func (p *processLane) addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(p.port)) }
func (p *processLane) caps() map[Capability]bool {
	return map[Capability]bool{CapKill: true, CapRestart: true, CapPause: true, CapReplicate: true}
}

func (p *processLane) pid() int {
	if p.cmd == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

func (p *processLane) kill() error {
	if p.cmd == nil {
		return errors.New("server is not running")
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
	if p.cmd == nil {
		return errors.New("server is not running")
	}
	if err := p.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("signal %v to pid %d: %w", sig, p.cmd.Process.Pid, err)
	}
	return nil
}

func (p *processLane) pause() error  { return p.signal(syscall.SIGSTOP) }
func (p *processLane) resume() error { return p.signal(syscall.SIGCONT) }

func (p *processLane) close() error {
	p.stop()
	return nil
}

func (p *processLane) logTail() string { return fileTail(p.logPath) }

// waitPing polls addr with a raw PING until it answers +PONG, ctx ends, or
// exited is closed (the server died).
func waitPing(ctx context.Context, addr string, exited <-chan struct{}) error {
	var last error
	for {
		select {
		case <-exited:
			return fmt.Errorf("server exited before answering PING on %s", addr)
		default:
		}
		if last = rawPing(ctx, addr); last == nil {
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

// rawPing sends one RESP PING on a fresh connection; no client library, so
// no background goroutines.
func rawPing(ctx context.Context, addr string) error {
	d := net.Dialer{Timeout: 500 * time.Millisecond}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(time.Second)); err != nil {
		return err
	}
	if _, err := io.WriteString(conn, "*1\r\n$4\r\nPING\r\n"); err != nil {
		return err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return err
	}
	if line != "+PONG\r\n" {
		return fmt.Errorf("PING reply %q", strings.TrimSpace(line))
	}
	return nil
}

// fileTail returns the last lines of the file at path, or "".
func fileTail(path string) string {
	const maxBytes, maxLines = 8 << 10, 30
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return ""
	}
	off := max(st.Size()-maxBytes, 0)
	b := make([]byte, st.Size()-off)
	if _, err := f.ReadAt(b, off); err != nil && !errors.Is(err, io.EOF) {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > maxLines {
		lines = lines[len(lines)-maxLines:]
	}
	return strings.Join(lines, "\n")
}

func tailSuffix(tail string) string {
	if tail == "" {
		return ""
	}
	return "\n--- server log (tail) ---\n" + tail
}
