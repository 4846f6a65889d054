package ratecarry_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/programs"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/ratecarry"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redisrate"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
	"github.com/tech-log/tech-log-backend/shared-contract/keyspace"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// The limits of the tests: a small old limit and a larger new one, over an
// hour, so that what either adds during a test (well under a minute) is a
// fraction of a unit; the tests still bound it (adds, on the server's
// clock).
const (
	smallLimit = 5
	largeLimit = 20
	period     = time.Hour
)

// roundingSlack is how many units the carry may count above what was
// admitted (rateplan's tests explain it): the Carrier reads the server's
// TIME to the millisecond (floored), while GCRA and the leaky bucket decide
// on its microsecond, so a state admitted earlier in the same millisecond
// can read as one more unit in use. It only under-admits.
const roundingSlack = 1

// algorithm builds the parameters of one algorithm for a limit over
// period. The leaky bucket is a queue of limit-1 waiting (Limit is
// QueueSize+1), every waiter delayed; its longest delay is under an hour.
type algorithm struct {
	name string
	over func(limit int64, period time.Duration) ratelimit.Params
}

// params are the algorithm's parameters for limit over the tests' period.
func (a algorithm) params(limit int64) ratelimit.Params { return a.over(limit, period) }

var algorithms = []algorithm{
	{"fixed_window", func(l int64, period time.Duration) ratelimit.Params {
		return ratelimit.FixedWindow{Limit: l, Window: period}
	}},
	{"sliding_window_counter", func(l int64, period time.Duration) ratelimit.Params {
		return ratelimit.SlidingWindowCounter{Limit: l, Window: period}
	}},
	{"token_bucket", func(l int64, period time.Duration) ratelimit.Params {
		return ratelimit.TokenBucket{Capacity: l, RefillTokens: l, RefillPeriod: period}
	}},
	{"gcra", func(l int64, period time.Duration) ratelimit.Params {
		return ratelimit.GCRA{Rate: l, Period: period, Burst: l}
	}},
	{"sliding_log", func(l int64, period time.Duration) ratelimit.Params {
		return ratelimit.SlidingLog{Limit: l, Window: period}
	}},
	{"leaky_bucket", func(l int64, period time.Duration) ratelimit.Params {
		return ratelimit.LeakyBucket{Rate: l, Period: period, QueueSize: l - 1, DelayAfter: 0, MaxDelay: period}
	}},
}

func algorithmNamed(t testing.TB, name string) algorithm {
	t.Helper()
	for _, a := range algorithms {
		if a.name == name {
			return a
		}
	}
	t.Fatalf("no algorithm %q", name)
	return algorithm{}
}

// policy is an enforced, fail-closed, subject-scoped policy of cost 1 at
// revision rev.
func policy(t testing.TB, id ratelimit.PolicyID, rev int64, params ratelimit.Params) ratelimit.Policy {
	t.Helper()
	p, err := ratelimit.NewPolicy(ratelimit.PolicySpec{ID: id, Revision: rev, Algorithm: params.Algorithm(), Params: params, MaxCost: 1,
		CleanupGrace: time.Minute, MaxClockRegression: 2 * time.Second, FailurePolicy: ratelimit.FailClosed})
	require.NoError(t, err)
	return p
}

func randomSubject(t testing.TB) ratelimit.SubjectDigest {
	t.Helper()
	b := make([]byte, 16)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return ratelimit.SubjectDigest(hex.EncodeToString(b))
}

// clientAt is a coordination client for addr (closed at cleanup).
func clientAt(t testing.TB, addr string) *redis.Client {
	t.Helper()
	c, err := redisrate.NewClient(redisrate.ClientConfig{
		Addr: addr, Protocol: redisrate.ProtocolRESP2, CommandTimeout: redisrate.DefaultCommandTimeout,
		DialTimeout: redisrate.DefaultDialTimeout, PoolSize: 8, PoolTimeout: redisrate.DefaultCommandTimeout,
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// deadAddr is a loopback address nothing listens on.
func deadAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

// provider builds and starts a provider over c (closed at cleanup).
func provider(t testing.TB, c *redis.Client, keys *keyspace.Builder, pols ...ratelimit.Policy) *redisrate.Provider {
	t.Helper()
	p, err := redisrate.New(c, keys, pols, redisrate.Options{CommandTimeout: redisrate.DefaultCommandTimeout, MaxInFlight: 8})
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, p.Start(ctx))
	return p
}

// observed records a Carrier's Observe calls; safe for concurrent use.
type observed struct {
	mu  sync.Mutex
	got []observation
}

type observation struct {
	policy ratelimit.PolicyID
	result ratecarry.Result
}

func (o *observed) observe(id ratelimit.PolicyID, r ratecarry.Result) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.got = append(o.got, observation{id, r})
}

// all is every observation so far, in order.
func (o *observed) all() []observation {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]observation(nil), o.got...)
}

// count is how many observations of id had result r.
func (o *observed) count(id ratelimit.PolicyID, r ratecarry.Result) int {
	n := 0
	for _, ob := range o.all() {
		if ob.policy == id && ob.result == r {
			n++
		}
	}
	return n
}

// carrier builds a Carrier over inner with client and one predecessor per
// pair (current, predecessor), observed by obs.
func carrier(t testing.TB, inner ratecarry.Inner, client redis.UniversalClient, keys *keyspace.Builder, obs *observed, pairs ...[2]ratelimit.Policy) *ratecarry.Carrier {
	t.Helper()
	opts := ratecarry.Options{Client: client, Keys: keys, Predecessors: map[ratelimit.PolicyID]ratelimit.Policy{}, Observe: obs.observe}
	for _, p := range pairs {
		opts.Policies = append(opts.Policies, p[0])
		opts.Predecessors[p[0].ID()] = p[1]
	}
	c, err := ratecarry.New(inner, opts)
	require.NoError(t, err)
	return c
}

func ask(p ratelimit.EdgePort, id ratelimit.PolicyID, subject ratelimit.SubjectDigest) ratelimit.Outcome {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return p.Evaluate(ctx, ratelimit.Request{PolicyID: id, SubjectDigest: subject, Cost: 1, Deadline: time.Now().Add(5 * time.Second)})
}

// admitted reports whether out admits, failing t on anything but an
// evaluated decision (a failure would be counted as a denial and hide a
// fault).
func admitted(t testing.TB, out ratelimit.Outcome) bool {
	t.Helper()
	e, ok := out.(ratelimit.Evaluated)
	require.True(t, ok, "outcome %#v is not evaluated", out)
	return e.Decision.Allowed
}

// countUntilDenied asks id for subject one unit at a time until it is
// denied, at most bound+1 times, and returns how many were admitted
// (leaky bucket admissions count whatever their delay).
func countUntilDenied(t testing.TB, p ratelimit.EdgePort, id ratelimit.PolicyID, subject ratelimit.SubjectDigest, bound int64) int64 {
	t.Helper()
	var n int64
	for range bound + 1 {
		if !admitted(t, ask(p, id, subject)) {
			return n
		}
		n++
	}
	t.Fatalf("%s admitted %d without a denial (bound %d)", id, n, bound)
	return n
}

// serverMillis is the server's TIME in milliseconds, rounded down, or up
// with ceil.
func serverMillis(t testing.TB, c *redis.Client, ceil bool) int64 {
	t.Helper()
	now, err := c.Time(redistest.AdminCtx(t)).Result()
	require.NoError(t, err)
	ms := now.UnixMilli()
	if ceil && now.UnixMicro()%1000 != 0 {
		ms++
	}
	return ms
}

// adds is what p admits between server instants from and to (ms) from a
// state spent to the last unit at from: its refill, new windows included
// (the programs' Go model). Starting earlier or ending later only adds.
func adds(p ratelimit.Policy, from, to int64) int64 {
	_, spent := programs.Charge(p, nil, from, p.Limit())
	return p.Limit() - programs.Consumed(p, spent, to)
}

// scriptCounter is a go-redis hook counting the commands a client sends
// (pipelined ones included); safe for concurrent use.
type scriptCounter struct{ n atomic.Int64 }

func (h *scriptCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *scriptCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmd)
	}
}

func (h *scriptCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// stubInner is an Inner for the options' tests: New never calls it.
type stubInner struct{ ratecarry.Inner }
