package rateplan_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/rateplan"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redisrate"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
	"github.com/tech-log/tech-log-backend/shared-contract/keyspace"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// TestStoreOnACluster: on Redis Cluster a change is one transaction in the
// subject's slot (its assignment and states share the slot tag), the
// carry holds (free spent, gold starts at free's limit consumed), a cache
// subscribed through the cluster client hears it, and List finds the
// assignments of subjects spread over every primary.
func TestStoreOnACluster(t *testing.T) {
	cl := redistest.StartCluster(t, redistest.WithReplicasPerPrimary(0))
	cc, err := redisrate.NewClusterClient(redisrate.ClientConfig{Protocol: redisrate.ProtocolRESP2, CommandTimeout: redisrate.DefaultCommandTimeout,
		DialTimeout: redisrate.DefaultDialTimeout, PoolSize: 8, PoolTimeout: redisrate.DefaultCommandTimeout}, cl.Addrs())
	require.NoError(t, err)
	t.Cleanup(func() { _ = cc.Close() })
	keys := redistest.RandomKeys(t)
	alg := algorithms[0]
	free, gold := policy(t, polAPIFree, alg.Over(freeLimit, period)), policy(t, polAPIGold, alg.Over(goldLimit, period))
	pols := []ratelimit.Policy{policy(t, polAPI, alg.Over(freeLimit, period)), free, gold}
	prov, err := redisrate.New(cc, keys, pols, redisrate.Options{CommandTimeout: redisrate.DefaultCommandTimeout, MaxInFlight: 8})
	require.NoError(t, err)
	t.Cleanup(func() { _ = prov.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, prov.Start(ctx))
	store, err := rateplan.NewStore(cc, keys, plansOf(t, pols), pols)
	require.NoError(t, err)
	cache := newCache(t, rateplan.CacheOptions{Client: cc, Keys: keys, TTL: time.Minute}, true)

	const subjects = 12
	var golds []ratelimit.SubjectDigest
	owners := map[string]bool{}
	for range subjects {
		s := randomSubject(t)
		golds = append(golds, s)
		key, err := rateplan.Key(keys, s)
		require.NoError(t, err)
		owners[cl.SlotOwner(keyspace.Slot(key)).Addr()] = true
		require.Equal(t, int64(freeLimit), countUntilDenied(t, prov, polAPIFree, s, 2*freeLimit))
		plan, err := cache.PlanOf(ctx, s)
		require.NoError(t, err)
		require.Equal(t, ratelimit.PlanID(""), plan)
		change, err := store.Set(ctx, s, planGold)
		require.NoError(t, err)
		require.Len(t, change.Moves, 1)
		assert.Equal(t, int64(freeLimit), change.Moves[0].Carried)
		assert.LessOrEqual(t, countUntilDenied(t, prov, polAPIGold, s, 2*goldLimit), int64(goldLimit-freeLimit)+1, "gold admits what is left of it, not a fresh budget")
		assert.False(t, admitted(t, ask(prov, polAPIFree, s)), "an instance still on free denies")
	}
	require.Greater(t, len(owners), 1, "the subjects span several primaries")
	require.Eventually(t, func() bool {
		for _, s := range golds {
			if p, err := cache.PlanOf(ctx, s); err != nil || p != planGold {
				return false
			}
		}
		return true
	}, 2*time.Second, 10*time.Millisecond, "the cache heard every change through the cluster")

	var mu sync.Mutex
	listed := map[string]ratelimit.PlanID{}
	require.NoError(t, store.List(ctx, func(key string, a rateplan.Assignment) error {
		mu.Lock()
		defer mu.Unlock()
		listed[key] = a.Plan
		return nil
	}))
	assert.Len(t, listed, subjects)
	for _, p := range listed {
		assert.Equal(t, planGold, p)
	}
}
