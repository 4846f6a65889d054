package examples_test

import (
	"testing"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
)

// TestMain runs the package's Examples and tests against real redis-servers
// they start themselves (redistest.MainWithRedis: skipped, saying why, when
// redis-server is not on PATH; a failure with REDIS_REQUIRED=1).
func TestMain(m *testing.M) { redistest.MainWithRedis(m, "examples") }

// privateRedis starts a private redis-server on a free loopback port and
// returns its address and a function that stops it and removes its files.
func privateRedis() (addr string, stop func()) { return redistest.ExampleServer("examples") }
