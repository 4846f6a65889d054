package redisserver

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redisinfo"
)

// BindAttempts bounds how often Launch picks a new port when the one it
// chose was taken before redis-server could bind it.
const BindAttempts = 5

// Errors of the launcher.
var (
	// ErrNotFound: the executable is not on PATH.
	ErrNotFound = errors.New("redis-server not found on PATH (Debian/Ubuntu: apt-get install redis-server)")
	// ErrAddrInUse: the server exited because its port was taken.
	ErrAddrInUse = errors.New("address already in use")
	// ErrNotRunning: the process has not been started or has been stopped.
	ErrNotRunning = errors.New("server is not running")
)

// DefaultArgs is the command line of a private server minus --port: no
// persistence, loopback only, protected mode, foreground, log to stdout
// (which Start sends to the log file), data in dir.
func DefaultArgs(dir string) []string {
	return []string{
		"--save", "",
		"--appendonly", "no",
		"--dir", dir,
		"--bind", "127.0.0.1",
		"--protected-mode", "yes",
		"--daemonize", "no",
		"--logfile", "",
	}
}

// Process is one server child process on 127.0.0.1:Port. Set the exported
// fields, then Start; or use Launch. It is not safe for concurrent use.
type Process struct {
	// Bin is the executable (redis-server, redis-sentinel).
	Bin string
	// Args is the command line minus "--port N", which Start appends.
	Args []string
	// LogPath is the file the child's stdout and stderr are appended to.
	LogPath string
	// Port is the TCP port the server binds on 127.0.0.1.
	Port int
	// TLS, when set, makes Port the server's tls-port (Start appends
	// "--tls-port N" instead of "--port N"; Args must then carry "--port 0"
	// and the tls-* directives) and is the client configuration of Start's
	// PING and INFO probes.
	TLS *tls.Config
	// Cluster makes the server a cluster node: Start appends
	// "--cluster-enabled yes --cluster-config-file nodes.conf
	// --cluster-port BusPort" (nodes.conf in Dir, the --dir of Args).
	Cluster bool
	// Dir is the server's data directory; StartOnFreePort removes a failed
	// attempt's nodes.conf there.
	Dir string
	// BusPort is the cluster bus port of a Cluster node.
	BusPort int
	// Env is added to this process's environment for the child (for
	// example a preloaded library).
	Env []string

	cmd  *exec.Cmd     // nil when not running
	done chan struct{} // closed once cmd has been reaped
}

// Config configures Launch.
type Config struct {
	// Bin is the executable; empty means redis-server from PATH.
	Bin string
	// Dir is the server's data directory (required); the caller owns it.
	Dir string
	// Args are appended to DefaultArgs(Dir) (e.g. "--maxmemory", "1mb").
	Args []string
	// LogPath is the log file; empty means Dir/redis.log.
	LogPath string
	// TLS, when set, is Process.TLS: the port is the tls-port (Args then
	// carry "--port 0" and the tls-* directives).
	TLS *tls.Config
	// Cluster makes the server a cluster node (see Process.Cluster).
	Cluster bool
	// Env is Process.Env.
	Env []string
}

// Launch starts a server as cfg says on a free port (StartOnFreePort) and
// waits until it answers PING; ctx bounds the whole start.
func Launch(ctx context.Context, cfg Config) (*Process, error) {
	if cfg.Dir == "" {
		return nil, errors.New("redisserver: Config.Dir is required")
	}
	bin := cfg.Bin
	if bin == "" {
		var err error
		if bin, err = exec.LookPath("redis-server"); err != nil {
			return nil, ErrNotFound
		}
	}
	p := &Process{
		Bin:     bin,
		Args:    append(DefaultArgs(cfg.Dir), cfg.Args...),
		LogPath: cfg.LogPath,
		TLS:     cfg.TLS,
		Cluster: cfg.Cluster,
		Dir:     cfg.Dir,
		Env:     cfg.Env,
	}
	if p.LogPath == "" {
		p.LogPath = filepath.Join(cfg.Dir, "redis.log")
	}
	if err := p.StartOnFreePort(ctx); err != nil {
		return nil, err
	}
	return p, nil
}

// LaunchInTempDir is Launch with cfg.Dir a new temporary directory named
// by pattern (os.MkdirTemp): it returns the server and the directory, the
// caller's to remove after stopping it; a failed launch removes it.
func LaunchInTempDir(ctx context.Context, pattern string, cfg Config) (*Process, string, error) {
	dir, err := os.MkdirTemp("", pattern)
	if err != nil {
		return nil, "", fmt.Errorf("redisserver: temp dir: %w", err)
	}
	cfg.Dir = dir
	p, err := Launch(ctx, cfg)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, "", err
	}
	return p, dir, nil
}

// NodesConf is the cluster state file of a Cluster node, in its Dir.
const NodesConf = "nodes.conf"

// StartOnFreePort starts the server (Start) on a free port, and a Cluster
// node on a free bus port too, chosen again on each attempt (OnFreePort):
// a port another process took between the choice and the bind stays
// taken. A failed attempt's nodes.conf, which names its ports, is removed
// first. The error carries the server log's tail.
func (p *Process) StartOnFreePort(ctx context.Context) error {
	err := OnFreePort(func(port int) error {
		p.Port = port
		if p.Cluster {
			bus, err := pickPortOtherThan(port)
			if err != nil {
				return err
			}
			p.BusPort = bus
			if err := os.Remove(filepath.Join(p.Dir, NodesConf)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("remove the failed attempt's %s: %w", NodesConf, err)
			}
		}
		return p.Start(ctx)
	})
	if err != nil {
		tail := p.LogTail()
		if tail != "" {
			tail = "\n--- server log (tail) ---\n" + tail
		}
		return fmt.Errorf("redisserver: start %s: %w%s", p.Bin, err, tail)
	}
	return nil
}

// Restart kills the running child, if any, and starts it again on the
// same Port (and BusPort, keeping nodes.conf: a cluster node keeps its
// identity). The port was the server's a moment ago, so a bind failure is
// a transient race: it is retried on the same port every 100ms, at most
// BindAttempts times, within ctx.
func (p *Process) Restart(ctx context.Context) error {
	p.Kill()
	var err error
	for attempt := 1; attempt <= BindAttempts; attempt++ {
		if err = p.Start(ctx); !errors.Is(err, ErrAddrInUse) {
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

// Start launches Bin on Port and waits until it answers PING and INFO
// server names its pid. ctx bounds the wait. When the port is taken (the
// server exits saying so, or another process answers), the error wraps
// ErrAddrInUse. On any error the child has been killed and reaped.
func (p *Process) Start(ctx context.Context) error {
	if p.cmd != nil {
		return fmt.Errorf("redisserver: %s already running as pid %d", p.Addr(), p.PID())
	}
	logf, err := os.OpenFile(p.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("open server log: %w", err)
	}
	defer logf.Close() // the child holds its own descriptor
	fmt.Fprintf(logf, "--- redisserver: starting on %s at %s\n", p.Addr(), time.Now().Format(time.RFC3339Nano))

	portFlag := "--port"
	if p.TLS != nil {
		portFlag = "--tls-port"
	}
	args := append(append([]string(nil), p.Args...), portFlag, strconv.Itoa(p.Port))
	if p.Cluster {
		args = append(args, "--cluster-enabled", "yes", "--cluster-config-file", NodesConf, "--cluster-port", strconv.Itoa(p.BusPort))
	}
	cmd := exec.Command(p.Bin, args...)
	if len(p.Env) > 0 {
		cmd.Env = append(os.Environ(), p.Env...)
	}
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("exec: %w", err)
	}
	done := make(chan struct{})
	go func() { // ends when the child exits; Kill waits for it
		_ = cmd.Wait()
		close(done)
	}()
	p.cmd, p.done = cmd, done

	if err := waitPing(ctx, p.Addr(), done, p.TLS); err != nil {
		exited := false
		select {
		case <-done:
			exited = true
		default:
		}
		p.Kill()
		if exited && strings.Contains(p.LogTail(), "Address already in use") {
			return fmt.Errorf("port %d: %w", p.Port, ErrAddrInUse)
		}
		return err
	}
	// Another server on the same port may have answered the PING: only
	// ours reports our pid.
	info, err := info(ctx, p.Addr(), "server", p.TLS)
	if err != nil {
		p.Kill()
		return fmt.Errorf("INFO server on %s: %w", p.Addr(), err)
	}
	if pid, _ := redisinfo.Field(info, "process_id"); pid != strconv.Itoa(p.cmd.Process.Pid) {
		p.Kill()
		return fmt.Errorf("port %d answered by pid %q, not ours: %w", p.Port, pid, ErrAddrInUse)
	}
	return nil
}

// Kill sends SIGKILL to the running child, if any, and waits until it is
// reaped.
func (p *Process) Kill() {
	if p.cmd == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL) // fails only if already exited
	<-p.done
	p.cmd, p.done = nil, nil
}

// Stop sends SIGTERM and waits up to grace for the child to exit, then
// kills it; the error says when it had to be killed.
func (p *Process) Stop(grace time.Duration) error {
	if p.cmd == nil {
		return nil
	}
	var err error
	if p.cmd.Process.Signal(syscall.SIGTERM) == nil {
		select {
		case <-p.done:
		case <-time.After(grace):
			err = fmt.Errorf("redisserver: %s ignored SIGTERM for %v; killed", p.Addr(), grace)
		}
	}
	p.Kill()
	return err
}

// Signal sends sig to the running child.
func (p *Process) Signal(sig syscall.Signal) error {
	if p.cmd == nil {
		return ErrNotRunning
	}
	if err := p.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("signal %v to pid %d: %w", sig, p.cmd.Process.Pid, err)
	}
	return nil
}

// Running reports whether a child was started and has not been killed.
// A child that exited by itself still counts until Kill or Stop; see Exited.
func (p *Process) Running() bool { return p.cmd != nil }

// Exited reports whether the started child has exited (false when none was
// started).
func (p *Process) Exited() bool {
	if p.done == nil {
		return false
	}
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// PID is the child's process id, 0 when not running.
func (p *Process) PID() int {
	if p.cmd == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// Addr is 127.0.0.1:Port.
func (p *Process) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(p.Port)) }

// LogTail returns the last lines of the log file, or "".
func (p *Process) LogTail() string { return FileTail(p.LogPath) }

// Info runs INFO section on the server and returns the reply text (parse it
// with package redisinfo).
func (p *Process) Info(ctx context.Context, section string) (string, error) {
	return info(ctx, p.Addr(), section, p.TLS)
}

// FileTail returns the last lines (at most 30, 8 KiB) of the file at path,
// or "".
func FileTail(path string) string {
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

// Poll calls f every interval until it returns nil or ctx ends, and then
// returns ctx's error wrapping f's last one: the one bounded wait of
// redistest's topologies and the demo's cluster.
func Poll(ctx context.Context, interval time.Duration, f func() error) error {
	for {
		err := f()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %w)", ctx.Err(), err)
		case <-time.After(interval):
		}
	}
}
