package redistest

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

// MainWithRedis is the TestMain of a package whose Examples and tests need
// a real redis-server: it runs m when redis-server is on PATH; otherwise it
// skips the package, saying why, or, with REDIS_REQUIRED=1, fails it, as in
// every service lane. It exits the process.
func MainWithRedis(m *testing.M, pkg string) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv(EnvRequired) == "1" {
			fmt.Fprintf(os.Stderr, "%s: %s=1 but redis-server is not on PATH\n", pkg, EnvRequired)
			os.Exit(1)
		}
		fmt.Printf("%s: skipped: redis-server not on PATH (apt-get install redis-server)\n", pkg)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// ExampleServer starts a private redis-server on a free loopback port for
// an Example, which has no *testing.T to clean up after it, and returns its
// address and a function that stops it and removes its files. It panics,
// naming pkg, when the server does not start within 20 s.
func ExampleServer(pkg string) (addr string, stop func()) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	p, dir, err := redisserver.LaunchInTempDir(ctx, "tlb-"+pkg+"-redis-", redisserver.Config{})
	if err != nil {
		panic(errors.Join(fmt.Errorf("%s: start redis-server", pkg), err))
	}
	return p.Addr(), func() {
		_ = p.Stop(5 * time.Second)
		_ = os.RemoveAll(dir)
	}
}
