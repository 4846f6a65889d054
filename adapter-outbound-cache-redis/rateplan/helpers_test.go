package rateplan_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/internal/changetest"
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

// The shared kit (internal/changetest) under this package's names.
type algorithm = changetest.Algorithm

var (
	algorithms       = changetest.Algorithms
	randomSubject    = changetest.RandomSubject
	clientAt         = changetest.ClientAt
	deadAddr         = changetest.DeadAddr
	ask              = changetest.Ask
	admitted         = changetest.Admitted
	countUntilDenied = changetest.CountUntilDenied
	serverMillis     = changetest.ServerMillis
	adds             = changetest.Adds
)

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

// provider builds and starts a provider over c (closed at cleanup).
func provider(t testing.TB, c *redis.Client, keys *keyspace.Builder, pols []ratelimit.Policy) *redisrate.Provider {
	t.Helper()
	return changetest.Provider(t, c, keys, pols...)
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
