package ratelimiter_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest/redisserver"
)

// TestMain skips the package, saying why, when redis-server is not on PATH
// (the Example and the tests need a real server); with REDIS_REQUIRED=1
// that is a failure, as in every service lane.
func TestMain(m *testing.M) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("REDIS_REQUIRED") == "1" {
			fmt.Fprintln(os.Stderr, "ratelimiter: REDIS_REQUIRED=1 but redis-server is not on PATH")
			os.Exit(1)
		}
		fmt.Println("ratelimiter: skipped: redis-server not on PATH (apt-get install redis-server)")
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// privateRedis starts the Example's private redis-server on a free
// loopback port and returns its address and a function that stops it.
func privateRedis() (addr string, stop func()) {
	dir, err := os.MkdirTemp("", "tlb-ratelimiter-example-")
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	p, err := redisserver.Launch(ctx, redisserver.Config{Dir: dir})
	if err != nil {
		os.RemoveAll(dir)
		panic(errors.Join(errors.New("ratelimiter example: start redis-server"), err))
	}
	return p.Addr(), func() {
		_ = p.Stop(5 * time.Second)
		os.RemoveAll(dir)
	}
}
