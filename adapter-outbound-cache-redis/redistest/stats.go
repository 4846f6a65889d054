package redistest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redisinfo"
)

// statsTimeout bounds one INFO commandstats or CONFIG RESETSTAT.
const statsTimeout = 5 * time.Second

// CommandStats returns INFO commandstats of the server behind c, read with
// redisinfo (the one INFO reader), keyed by command name ("evalsha",
// "config|resetstat"); a command that never ran since the last CONFIG
// RESETSTAT has no entry, so its figures read 0. It fails t when INFO
// fails or its reply is malformed.
func CommandStats(t testing.TB, c *redis.Client) map[string]redisinfo.CommandStat {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), statsTimeout)
	defer cancel()
	info, err := c.Info(ctx, "commandstats").Result()
	if err != nil {
		t.Fatalf("redistest: %s: INFO commandstats: %v", c.Options().Addr, err)
	}
	stats, err := redisinfo.CommandStats(info)
	if err != nil {
		t.Fatalf("redistest: %s: %v", c.Options().Addr, err)
	}
	return stats
}

// sumCommandCalls sums the calls of commands over nodes.
func sumCommandCalls(t testing.TB, nodes []*Server, commands []string) int64 {
	t.Helper()
	var total int64
	for _, s := range nodes {
		stats := CommandStats(t, s.Client())
		for _, cmd := range commands {
			total += stats[cmd].Calls
		}
	}
	return total
}

// resetStats runs CONFIG RESETSTAT on every node.
func resetStats(t testing.TB, nodes []*Server) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), statsTimeout)
	defer cancel()
	for _, s := range nodes {
		if err := s.Client().ConfigResetStat(ctx).Err(); err != nil {
			t.Fatalf("redistest: node %s: CONFIG RESETSTAT: %v", s.Addr(), err)
		}
	}
}

// KeyCount counts c's keys, leaving out every key that contains one of
// except (for example a service's bookkeeping, such as the revision
// catalog, when a test asserts that requests wrote nothing). For a private
// test server only: it reads every key name.
func KeyCount(t testing.TB, c *redis.Client, except ...string) int64 {
	t.Helper()
	keys, err := c.Keys(AdminCtx(t), "*").Result()
	if err != nil {
		t.Fatalf("redistest: KEYS: %v", err)
	}
	n := int64(0)
next:
	for _, k := range keys {
		for _, e := range except {
			if strings.Contains(k, e) {
				continue next
			}
		}
		n++
	}
	return n
}
