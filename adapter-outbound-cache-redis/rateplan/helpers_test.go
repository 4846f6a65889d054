package rateplan_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/programs"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/ratedenial"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/rateplan"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redisrate"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
	"github.com/tech-log/tech-log-backend/shared-contract/keyspace"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// The plans of every test: subjects without an assignment are on free;
// base policy "api" is decided by "api-free" or "api-gold"; gold also maps
// "search" (free leaves it as it is); "other" is mapped by no plan.
const (
	planFree ratelimit.PlanID = "free"
	planGold ratelimit.PlanID = "gold"

	polAPI        ratelimit.PolicyID = "api"
	polAPIFree    ratelimit.PolicyID = "api-free"
	polAPIGold    ratelimit.PolicyID = "api-gold"
	polSearch     ratelimit.PolicyID = "search"
	polSearchGold ratelimit.PolicyID = "search-gold"
	polOther      ratelimit.PolicyID = "other"
)

// The limits of the store's tests: a small free limit and a larger gold
// one, over an hour, so that what either adds during a test (well under a
// minute) is a fraction of a unit; the tests still bound it (refill).
const (
	freeLimit = 5
	goldLimit = 20
	period    = time.Hour
)

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

// policy is an enforced, fail-closed, subject-scoped policy of cost 1.
func policy(t testing.TB, id ratelimit.PolicyID, params ratelimit.Params) ratelimit.Policy {
	t.Helper()
	p, err := ratelimit.NewPolicy(ratelimit.PolicySpec{ID: id, Revision: 1, Algorithm: params.Algorithm(), Params: params, MaxCost: 1,
		CleanupGrace: time.Minute, MaxClockRegression: 2 * time.Second, FailurePolicy: ratelimit.FailClosed})
	require.NoError(t, err)
	return p
}

// plansOf is the test's plans (see planFree) over pols.
func plansOf(t testing.TB, pols []ratelimit.Policy) ratelimit.Plans {
	t.Helper()
	byID := map[ratelimit.PolicyID]ratelimit.Policy{}
	for _, p := range pols {
		byID[p.ID()] = p
	}
	gold := map[ratelimit.PolicyID]ratelimit.PolicyID{polAPI: polAPIGold}
	if _, ok := byID[polSearch]; ok {
		gold[polSearch] = polSearchGold
	}
	plans, err := ratelimit.NewPlans(planFree, []ratelimit.Plan{
		{ID: planFree, Policies: map[ratelimit.PolicyID]ratelimit.PolicyID{polAPI: polAPIFree}},
		{ID: planGold, Policies: gold},
	}, byID)
	require.NoError(t, err)
	return plans
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
func provider(t testing.TB, c *redis.Client, keys *keyspace.Builder, pols []ratelimit.Policy) *redisrate.Provider {
	t.Helper()
	p, err := redisrate.New(c, keys, pols, redisrate.Options{CommandTimeout: redisrate.DefaultCommandTimeout, MaxInFlight: 8})
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, p.Start(ctx))
	return p
}

// newCache builds a cache (closed at cleanup); start starts its
// subscription.
func newCache(t testing.TB, opts rateplan.CacheOptions, start bool) *rateplan.Cache {
	t.Helper()
	c, err := rateplan.NewCache(opts)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	if start {
		require.NoError(t, c.Start(context.Background()))
	}
	return c
}

// waitSubscribers waits (at most 5 s) until n connections are subscribed
// to the invalidation channel on srv.
func waitSubscribers(t testing.TB, srv *redistest.Server, n int64) {
	t.Helper()
	ctx := redistest.AdminCtx(t)
	require.Eventually(t, func() bool {
		m, err := srv.Client().PubSubNumSub(ctx, ratedenial.Channel).Result()
		return err == nil && m[ratedenial.Channel] >= n
	}, 5*time.Second, 5*time.Millisecond, "the caches never subscribed")
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
