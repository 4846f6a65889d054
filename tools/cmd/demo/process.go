package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redisinfo"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest/redisserver"
)

// Bounds on the processes the demo runs.
const (
	redisReadyWait    = 10 * time.Second
	instanceReadyWait = 30 * time.Second
	stopWait          = 10 * time.Second
	buildWait         = 5 * time.Minute
)

// child is a process the demo started; stop ends it (SIGTERM, then SIGKILL
// after stopWait) exactly once and waits for it.
type child struct {
	cmd  *exec.Cmd
	done chan struct{}
	once sync.Once
}

func startChild(cmd *exec.Cmd) (*child, error) {
	// Own process group: Ctrl-C reaches the demo, which stops its children
	// in order, instead of reaching everything at once.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &child{cmd: cmd, done: make(chan struct{})}, nil
}

func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

func (c *child) stop() {
	c.once.Do(func() {
		if c.exited() {
			return
		}
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-c.done:
		case <-time.After(stopWait):
			_ = c.cmd.Process.Kill()
			<-c.done
		}
	})
}

// redisServer is the demo's private redis-server (package redisserver).
type redisServer struct {
	proc    *redisserver.Process
	addr    string
	version string
}

// startRedis runs redis-server from PATH on a free 127.0.0.1 port, without
// persistence, and waits until it answers PING.
func startRedis(ctx context.Context, dir string) (*redisServer, error) {
	ctx, cancel := context.WithTimeout(ctx, redisReadyWait)
	defer cancel()
	proc, err := redisserver.Launch(ctx, redisserver.Config{Dir: dir})
	if errors.Is(err, redisserver.ErrNotFound) {
		return nil, errors.New("redis-server is not on PATH; install it (Debian/Ubuntu: apt-get install redis-server) and run again")
	}
	if err != nil {
		return nil, fmt.Errorf("redis-server did not come up (see %s): %w", filepath.Join(dir, "redis.log"), err)
	}
	version := "unknown"
	if info, err := proc.Info(ctx, "server"); err == nil {
		if v, ok := redisinfo.Field(info, "redis_version"); ok {
			version = v
		}
	}
	return &redisServer{proc: proc, addr: proc.Addr(), version: version}, nil
}

// stop ends the server (SIGTERM, then SIGKILL after stopWait); it may be
// called more than once.
func (r *redisServer) stop() { _ = r.proc.Stop(stopWait) }

// build compiles the service into bin.
func build(ctx context.Context, root, bin string) error {
	ctx, cancel := context.WithTimeout(ctx, buildWait)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/tech-log-backend")
	cmd.Dir = filepath.Join(root, "app-bootstrap")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build: %w\n%s", err, out)
	}
	return nil
}

// instance is one running service process.
type instance struct {
	*child
	name    string
	addr    string
	logPath string
}

// startInstance runs the service with env on a free loopback port (-addr
// 127.0.0.1:0), copies its log to logPath and waits for its "listening"
// line.
func startInstance(ctx context.Context, name, bin string, env []string, logPath string) (*instance, error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "-addr", "127.0.0.1:0")
	cmd.Env = env
	stderr, err := cmd.StderrPipe()
	if err != nil {
		logFile.Close()
		return nil, err
	}
	c, err := startChild(cmd)
	if err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start instance %s: %w", name, err)
	}
	in := &instance{child: c, name: name, logPath: logPath}
	addrCh := make(chan string, 1)
	go func() {
		defer func() {
			_ = cmd.Wait()
			logFile.Close()
			close(c.done)
		}()
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Bytes()
			_, _ = logFile.Write(append(line, '\n'))
			var rec struct {
				Msg  string `json:"msg"`
				Addr string `json:"addr"`
			}
			if json.Unmarshal(line, &rec) == nil && rec.Msg == "listening" && rec.Addr != "" {
				select {
				case addrCh <- rec.Addr:
				default:
				}
			}
		}
	}()
	select {
	case in.addr = <-addrCh:
		return in, nil
	case <-c.done:
		return nil, fmt.Errorf("instance %s exited before listening; its log:\n%s", name, tail(logPath))
	case <-time.After(instanceReadyWait):
		in.stop()
		return nil, fmt.Errorf("instance %s not listening within %v; its log:\n%s", name, instanceReadyWait, tail(logPath))
	case <-ctx.Done():
		in.stop()
		return nil, ctx.Err()
	}
}

// tail returns the last lines of a log file.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(no log)"
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 20 {
		lines = lines[len(lines)-20:]
	}
	return strings.Join(lines, "\n")
}

// instanceEnv is the whole environment of an instance: nothing of the
// caller's APP_ variables leaks in.
func instanceEnv(redisAddr, policies, keySecret, subjectSecret string) []string {
	return []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + os.Getenv("HOME"),
		"APP_LOG_FORMAT=json",
		"APP_SHUTDOWN_TIMEOUT=5s",
		"APP_RATE_LIMIT_ENABLED=true",
		"APP_RATE_LIMIT_PROVIDER=redis",
		"APP_RATE_LIMIT_REDIS_ADDR=" + redisAddr,
		"APP_RATE_LIMIT_KEY_SECRET=" + keySecret,
		"APP_RATE_LIMIT_POLICIES_FILE=" + policies,
		"APP_RATE_LIMIT_DEFAULT_POLICY=demo",
		"APP_WEB_SUBJECT_SECRET=" + subjectSecret,
		// The per-process local limiter is off so that only the global
		// limit is visible in the numbers.
		"APP_WEB_LOCAL_LIMIT_ENABLED=false",
	}
}
