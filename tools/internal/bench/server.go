package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redisinfo"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest/redisserver"
)

// ErrNoRedisServer is returned by StartServer when redis-server is not on
// PATH.
var ErrNoRedisServer = redisserver.ErrNotFound

// Bounds of the private server's life cycle.
const (
	serverStartTimeout = 15 * time.Second
	serverStopTimeout  = 10 * time.Second
)

// Server is the benchmark's private redis-server (package redisserver): a
// child process on a free 127.0.0.1 port with a temporary directory, no
// persistence. Admin is a plain go-redis client for FLUSHALL, INFO and
// CONFIG RESETSTAT; the measured limiters get their own clients.
type Server struct {
	Addr    string
	Version string
	Admin   *redis.Client

	dir  string
	proc *redisserver.Process
}

// StartServer launches redis-server and waits until it answers PING.
func StartServer(ctx context.Context) (*Server, error) {
	ctx, cancel := context.WithTimeout(ctx, serverStartTimeout)
	defer cancel()
	proc, dir, err := redisserver.LaunchInTempDir(ctx, "tlb-bench-redis-", redisserver.Config{})
	if err != nil {
		if errors.Is(err, redisserver.ErrNotFound) {
			return nil, ErrNoRedisServer
		}
		return nil, fmt.Errorf("bench: %w", err)
	}
	s := &Server{Addr: proc.Addr(), dir: dir, proc: proc}
	s.Admin = redis.NewClient(&redis.Options{Addr: s.Addr, Protocol: 2, MaxRetries: -1, DisableIdentity: true})
	info, err := s.Info(ctx, "server")
	if err != nil {
		_ = s.Close()
		return nil, err
	}
	s.Version = info["redis_version"]
	return s, nil
}

// Close stops the server (SIGTERM, SIGKILL after a bound), waits until the
// process is reaped and removes its directory.
func (s *Server) Close() error {
	_ = s.Admin.Close()
	err := s.proc.Stop(serverStopTimeout)
	if rmErr := os.RemoveAll(s.dir); rmErr != nil && err == nil {
		err = fmt.Errorf("bench: remove %s: %w", s.dir, rmErr)
	}
	return err
}

// Info runs INFO section and returns its fields (redisinfo.Parse).
func (s *Server) Info(ctx context.Context, section string) (map[string]string, error) {
	text, err := s.infoText(ctx, section)
	if err != nil {
		return nil, err
	}
	return redisinfo.Parse(text), nil
}

func (s *Server) infoText(ctx context.Context, section string) (string, error) {
	text, err := s.Admin.Info(ctx, section).Result()
	if err != nil {
		return "", fmt.Errorf("bench: INFO %s: %w", section, err)
	}
	return text, nil
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

// CommandStat is one cmdstat_<name> line of INFO commandstats.
type CommandStat = redisinfo.CommandStat

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
