// Package changetest is the shared kit of the tests of a change of limit
// (rateplan's change of plan, ratecarry's change of revision; ADR 0039,
// ADR 0040): one set of parameters per algorithm over any period, a real
// provider over a private server, and the counting and bounding those
// tests share (CountUntilDenied, ServerMillis, Adds: what a policy refills
// over an interval on the server's clock, by the programs' Go model).
//
// It is test support: it imports testing (not testify: it is not a test
// file, and the module table allows testify in tests only), and only tests
// import it. It must never import an adapter's non-test packages other
// than redisrate, programs and redistest.
package changetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/programs"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redisrate"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
	"github.com/tech-log/tech-log-backend/shared-contract/keyspace"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// Algorithm builds the parameters of one algorithm for a limit over a
// period. The leaky bucket is a queue of limit-1 waiting (Limit is
// QueueSize+1), every waiter delayed.
type Algorithm struct {
	Name string
	Over func(limit int64, period time.Duration) ratelimit.Params
}

// Algorithms is one Algorithm per algorithm of the registry.
var Algorithms = []Algorithm{
	{"fixed_window", func(l int64, p time.Duration) ratelimit.Params { return ratelimit.FixedWindow{Limit: l, Window: p} }},
	{"sliding_window_counter", func(l int64, p time.Duration) ratelimit.Params {
		return ratelimit.SlidingWindowCounter{Limit: l, Window: p}
	}},
	{"token_bucket", func(l int64, p time.Duration) ratelimit.Params {
		return ratelimit.TokenBucket{Capacity: l, RefillTokens: l, RefillPeriod: p}
	}},
	{"gcra", func(l int64, p time.Duration) ratelimit.Params { return ratelimit.GCRA{Rate: l, Period: p, Burst: l} }},
	{"sliding_log", func(l int64, p time.Duration) ratelimit.Params { return ratelimit.SlidingLog{Limit: l, Window: p} }},
	{"leaky_bucket", func(l int64, p time.Duration) ratelimit.Params {
		return ratelimit.LeakyBucket{Rate: l, Period: p, QueueSize: l - 1, DelayAfter: 0, MaxDelay: p}
	}},
	// A concurrency limit of l slots, each held at most one period.
	{"concurrency", func(l int64, p time.Duration) ratelimit.Params { return ratelimit.Concurrency{Limit: l, MaxHold: p} }},
}

// Named is the Algorithm named name; it fails t for none.
func Named(t testing.TB, name string) Algorithm {
	t.Helper()
	for _, a := range Algorithms {
		if a.Name == name {
			return a
		}
	}
	t.Fatalf("changetest: no algorithm %q", name)
	return Algorithm{}
}

// RandomSubject is a fresh subject digest.
func RandomSubject(t testing.TB) ratelimit.SubjectDigest {
	t.Helper()
	b := make([]byte, 16)
	_, err := rand.Read(b)
	must(t, err)
	return ratelimit.SubjectDigest(hex.EncodeToString(b))
}

// ClientAt is a coordination client for addr (closed at cleanup).
func ClientAt(t testing.TB, addr string) *redis.Client {
	t.Helper()
	c, err := redisrate.NewClient(redisrate.ClientConfig{
		Addr: addr, Protocol: redisrate.ProtocolRESP2, CommandTimeout: redisrate.DefaultCommandTimeout,
		DialTimeout: redisrate.DefaultDialTimeout, PoolSize: 8, PoolTimeout: redisrate.DefaultCommandTimeout,
	})
	must(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// DeadAddr is a loopback address nothing listens on.
func DeadAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	addr := l.Addr().String()
	must(t, l.Close())
	return addr
}

// Provider builds and starts a provider of pols over c (closed at
// cleanup).
func Provider(t testing.TB, c *redis.Client, keys *keyspace.Builder, pols ...ratelimit.Policy) *redisrate.Provider {
	t.Helper()
	p, err := redisrate.New(c, keys, pols, redisrate.Options{CommandTimeout: redisrate.DefaultCommandTimeout, MaxInFlight: 8})
	must(t, err)
	t.Cleanup(func() { _ = p.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	must(t, p.Start(ctx))
	return p
}

// Ask is one decision of one unit of id for subject.
func Ask(p ratelimit.EdgePort, id ratelimit.PolicyID, subject ratelimit.SubjectDigest) ratelimit.Outcome {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return p.Evaluate(ctx, ratelimit.Request{PolicyID: id, SubjectDigest: subject, Cost: 1, Deadline: time.Now().Add(5 * time.Second)})
}

// Admitted reports whether out admits, failing t on anything but an
// evaluated decision (a failure would be counted as a denial and hide a
// fault).
func Admitted(t testing.TB, out ratelimit.Outcome) bool {
	t.Helper()
	e, ok := out.(ratelimit.Evaluated)
	if !ok {
		t.Fatalf("changetest: outcome %#v is not evaluated", out)
	}
	return e.Decision.Allowed
}

// CountUntilDenied asks id for subject one unit at a time until it is
// denied, at most bound+1 times, and returns how many were admitted
// (leaky bucket admissions count whatever their delay).
func CountUntilDenied(t testing.TB, p ratelimit.EdgePort, id ratelimit.PolicyID, subject ratelimit.SubjectDigest, bound int64) int64 {
	t.Helper()
	var n int64
	for range bound + 1 {
		if !Admitted(t, Ask(p, id, subject)) {
			return n
		}
		n++
	}
	t.Fatalf("%s admitted %d without a denial (bound %d)", id, n, bound)
	return n
}

// ServerMillis is the server's TIME in milliseconds, rounded down, or up
// with ceil.
func ServerMillis(t testing.TB, c *redis.Client, ceil bool) int64 {
	t.Helper()
	now, err := c.Time(redistest.AdminCtx(t)).Result()
	must(t, err)
	ms := now.UnixMilli()
	if ceil && now.UnixMicro()%1000 != 0 {
		ms++
	}
	return ms
}

// Adds is what p admits between server instants from and to (ms) from a
// state spent to the last unit at from: its refill, new windows included
// (the programs' Go model). Starting earlier or ending later only adds.
func Adds(p ratelimit.Policy, from, to int64) int64 {
	_, spent := programs.Charge(p, nil, from, p.Limit())
	return p.Limit() - programs.Consumed(p, spent, to)
}

// must fails t on err.
func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("changetest: %v", err)
	}
}
