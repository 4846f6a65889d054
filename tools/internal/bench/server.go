package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrNoRedisServer is returned by StartServer when redis-server is not on
// PATH.
var ErrNoRedisServer = errors.New("redis-server not found on PATH (apt-get install redis-server)")

// Bounds of the private server's life cycle.
const (
	serverStartTimeout = 15 * time.Second
	serverStopTimeout  = 10 * time.Second
	bindAttempts       = 5
)

// Server is the benchmark's private redis-server: a child process on a free
// 127.0.0.1 port with a temporary directory, no persistence (--save "",
// --appendonly no). Admin is a plain go-redis client for FLUSHALL, INFO and
// CONFIG RESETSTAT; the measured limiters get their own clients.
type Server struct {
	Addr    string
	Version string
	Admin   *redis.Client

	dir  string
	cmd  *exec.Cmd
	done chan struct{}
}

// StartServer launches redis-server and waits until it answers PING.
func StartServer(ctx context.Context) (*Server, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, ErrNoRedisServer
	}
	dir, err := os.MkdirTemp("", "tlb-bench-redis-")
	if err != nil {
		return nil, fmt.Errorf("bench: server temp dir: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, serverStartTimeout)
	defer cancel()
	for attempt := 1; ; attempt++ {
		s, err := startOnFreePort(ctx, bin, dir)
		if err == nil {
			return s, nil
		}
		if !errors.Is(err, errAddrInUse) || attempt == bindAttempts {
			_ = os.RemoveAll(dir)
			return nil, err
		}
	}
}

var errAddrInUse = errors.New("address already in use")

func startOnFreePort(ctx context.Context, bin, dir string) (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("bench: pick a free port: %w", err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	if err := ln.Close(); err != nil {
		return nil, fmt.Errorf("bench: release port %d: %w", port, err)
	}
	logPath := filepath.Join(dir, "redis.log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("bench: server log: %w", err)
	}
	defer logf.Close() // the child holds its own descriptor
	cmd := exec.Command(bin,
		"--port", strconv.Itoa(port),
		"--bind", "127.0.0.1",
		"--protected-mode", "yes",
		"--save", "",
		"--appendonly", "no",
		"--dir", dir,
		"--daemonize", "no",
		"--logfile", "",
	)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("bench: exec %s: %w", bin, err)
	}
	s := &Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), dir: dir, cmd: cmd, done: make(chan struct{})}
	go func() { // ends when the child exits; Close waits for it
		_ = cmd.Wait()
		close(s.done)
	}()
	s.Admin = redis.NewClient(&redis.Options{Addr: s.Addr, Protocol: 2, MaxRetries: -1, DisableIdentity: true})
	if err := s.waitReady(ctx); err != nil {
		log, _ := os.ReadFile(logPath)
		s.kill()
		if bytes.Contains(log, []byte("Address already in use")) {
			return nil, fmt.Errorf("bench: port %d: %w", port, errAddrInUse)
		}
		return nil, fmt.Errorf("bench: redis-server did not start: %w; log: %s", err, tail(string(log), 400))
	}
	info, err := s.Info(ctx, "server")
	if err != nil {
		s.kill()
		return nil, err
	}
	s.Version = info["redis_version"]
	return s, nil
}

func (s *Server) waitReady(ctx context.Context) error {
	for {
		select {
		case <-s.done:
			return errors.New("redis-server exited")
		default:
		}
		pctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		err := s.Admin.Ping(pctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no PONG: %w (last error: %v)", ctx.Err(), err)
		case <-s.done:
			return errors.New("redis-server exited")
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Close stops the server (SIGTERM, SIGKILL after a bound), waits until the
// process is reaped and removes its directory.
func (s *Server) Close() error {
	_ = s.Admin.Close()
	var err error
	if s.cmd.Process.Signal(syscall.SIGTERM) == nil {
		select {
		case <-s.done:
		case <-time.After(serverStopTimeout):
			err = errors.New("bench: redis-server ignored SIGTERM; killed")
		}
	}
	s.kill()
	if rmErr := os.RemoveAll(s.dir); rmErr != nil && err == nil {
		err = fmt.Errorf("bench: remove %s: %w", s.dir, rmErr)
	}
	return err
}

func (s *Server) kill() {
	_ = s.cmd.Process.Signal(syscall.SIGKILL) // fails only when already gone
	<-s.done
}

// Info runs INFO section and returns its fields.
func (s *Server) Info(ctx context.Context, section string) (map[string]string, error) {
	text, err := s.Admin.Info(ctx, section).Result()
	if err != nil {
		return nil, fmt.Errorf("bench: INFO %s: %w", section, err)
	}
	return parseInfo(text), nil
}

// Flush empties the server synchronously.
func (s *Server) Flush(ctx context.Context) error {
	if err := s.Admin.Do(ctx, "flushall", "sync").Err(); err != nil {
		return fmt.Errorf("bench: FLUSHALL: %w", err)
	}
	return nil
}

// ResetStats zeroes INFO commandstats (CONFIG RESETSTAT).
func (s *Server) ResetStats(ctx context.Context) error {
	if err := s.Admin.ConfigResetStat(ctx).Err(); err != nil {
		return fmt.Errorf("bench: CONFIG RESETSTAT: %w", err)
	}
	return nil
}

// parseInfo splits an INFO reply into name -> value.
func parseInfo(text string) map[string]string {
	out := map[string]string{}
	for line := range strings.Lines(text) {
		line = strings.TrimRight(line, "\r\n")
		if line == "" || line[0] == '#' {
			continue
		}
		if name, value, ok := strings.Cut(line, ":"); ok {
			out[name] = value
		}
	}
	return out
}

// CommandStat is one cmdstat_<name> line of INFO commandstats.
type CommandStat struct {
	Calls       int64   `json:"calls"`
	Usec        int64   `json:"usec"`
	UsecPerCall float64 `json:"usecPerCall"`
}

// commandStats parses every cmdstat_ line of an INFO commandstats reply,
// keyed by command name (e.g. "evalsha", "hset").
func commandStats(info map[string]string) (map[string]CommandStat, error) {
	out := map[string]CommandStat{}
	for name, value := range info {
		cmd, ok := strings.CutPrefix(name, "cmdstat_")
		if !ok {
			continue
		}
		var st CommandStat
		for kv := range strings.SplitSeq(value, ",") {
			k, v, _ := strings.Cut(kv, "=")
			var err error
			switch k {
			case "calls":
				st.Calls, err = strconv.ParseInt(v, 10, 64)
			case "usec":
				st.Usec, err = strconv.ParseInt(v, 10, 64)
			case "usec_per_call":
				st.UsecPerCall, err = strconv.ParseFloat(v, 64)
			}
			if err != nil {
				return nil, fmt.Errorf("bench: commandstats %s %s: %w", cmd, k, err)
			}
		}
		out[cmd] = st
	}
	return out, nil
}

// infoFloat reads a numeric INFO field.
func infoFloat(info map[string]string, name string) (float64, error) {
	v, ok := info[name]
	if !ok {
		return 0, fmt.Errorf("bench: INFO has no field %s", name)
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		return 0, fmt.Errorf("bench: INFO %s=%q: %w", name, v, err)
	}
	return f, nil
}

// serverCPU is used_cpu_user + used_cpu_sys in seconds.
func (s *Server) serverCPU(ctx context.Context) (float64, error) {
	info, err := s.Info(ctx, "cpu")
	if err != nil {
		return 0, err
	}
	u, err := infoFloat(info, "used_cpu_user")
	if err != nil {
		return 0, err
	}
	sys, err := infoFloat(info, "used_cpu_sys")
	if err != nil {
		return 0, err
	}
	return u + sys, nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}
