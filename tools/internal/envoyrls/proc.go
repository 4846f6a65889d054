package envoyrls

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Bounds of the processes the harness runs.
const (
	// ReadyWait bounds the wait for a started service to answer.
	ReadyWait = 30 * time.Second
	// StopWait bounds the wait between SIGTERM and SIGKILL.
	StopWait  = 10 * time.Second
	pollEvery = 50 * time.Millisecond
)

// process is a child process with its output in a log file; stop ends it
// once and waits until it is reaped.
type process struct {
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
	once    sync.Once
}

// startProcess runs bin with args and exactly env (nothing of the caller's
// environment leaks in), stdout and stderr appended to logPath, in its own
// process group.
func startProcess(bin string, args, env []string, logPath string) (*process, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("envoyrls: log file: %w", err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Stdout = f
	cmd.Stderr = f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("envoyrls: start %s: %w", bin, err)
	}
	p := &process{cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		_ = f.Close()
		close(p.done)
	}()
	return p, nil
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM, SIGKILL after StopWait, and waits for the exit.
func (p *process) stop() {
	p.once.Do(func() {
		if p.exited() {
			return
		}
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(StopWait):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
}

// logTail is the end of the process's log, for error messages.
func (p *process) logTail() string { return fileTail(p.logPath, 2000) }

func fileTail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	s := strings.TrimSpace(string(b))
	if len(s) > n {
		s = "..." + s[len(s)-n:]
	}
	return s
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("envoyrls: free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// freePorts returns n distinct free ports.
func freePorts(n int) ([]int, error) {
	ls := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("envoyrls: free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// errNotReady is what a probe returns while it should be tried again.
var errNotReady = errors.New("not ready")

// errExited is wrapped by poll when the process ended before it was ready
// (a port taken in between is one cause: worth another attempt).
var errExited = errors.New("exited")

// poll calls probe every pollEvery until it returns nil, the process exits,
// ctx ends or wait passes; the error names the last probe failure.
func poll(ctx context.Context, p *process, wait time.Duration, what string, probe func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	var last error
	for {
		pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
		last = probe(pctx)
		pcancel()
		if last == nil {
			return nil
		}
		if p != nil && p.exited() {
			return fmt.Errorf("envoyrls: %s %w before it was ready (%w); its log:\n%s", what, errExited, last, p.logTail())
		}
		select {
		case <-ctx.Done():
			tail := ""
			if p != nil {
				tail = "; its log:\n" + p.logTail()
			}
			return fmt.Errorf("envoyrls: %s not ready within %v: %w%s", what, wait, last, tail)
		case <-time.After(pollEvery):
		}
	}
}

// dialProbe succeeds once addr accepts a TCP connection.
func dialProbe(addr string) func(context.Context) error {
	return func(ctx context.Context) error {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return fmt.Errorf("%w: %w", errNotReady, err)
		}
		return c.Close()
	}
}

// baseEnv is the environment every child starts from: PATH and HOME only.
func baseEnv() []string {
	return []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's times (100 on
// every Linux platform Go supports).
const clockTicks = 100

// ProcessCPU is the user + system CPU time the process pid (all its
// threads) has used, from /proc/<pid>/stat (Linux only).
func ProcessCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("envoyrls: cpu of %d: %w", pid, err)
	}
	// The command name (field 2) may hold spaces; fields count from its ")".
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("envoyrls: cpu of %d: malformed stat", pid)
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("envoyrls: cpu of %d: short stat", pid)
	}
	var ticks int64
	for _, v := range f[11:13] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("envoyrls: cpu of %d: %w", pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}
