package envoyrls

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest/redisserver"
)

// ErrNoRedisServer is returned by StartRedis when redis-server is not on
// PATH.
var ErrNoRedisServer = redisserver.ErrNotFound

// Redis is a private redis-server on a free 127.0.0.1 port, no
// persistence, in its own temporary directory.
type Redis struct {
	Addr string
	proc *redisserver.Process
	dir  string
}

// StartRedis launches redis-server and waits (bounded by ReadyWait) until
// it answers PING.
func StartRedis(ctx context.Context) (*Redis, error) {
	ctx, cancel := context.WithTimeout(ctx, ReadyWait)
	defer cancel()
	proc, dir, err := redisserver.LaunchInTempDir(ctx, "tlb-envoyrls-redis-", redisserver.Config{})
	if err != nil {
		if errors.Is(err, redisserver.ErrNotFound) {
			return nil, ErrNoRedisServer
		}
		return nil, fmt.Errorf("envoyrls: redis-server: %w", err)
	}
	return &Redis{Addr: proc.Addr(), proc: proc, dir: dir}, nil
}

// Close stops the server (SIGTERM, SIGKILL after StopWait) and removes its
// directory.
func (r *Redis) Close() error {
	err := r.proc.Stop(StopWait)
	if rmErr := os.RemoveAll(r.dir); rmErr != nil && err == nil {
		err = fmt.Errorf("envoyrls: remove %s: %w", r.dir, rmErr)
	}
	return err
}
