package reliability_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/programs"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/rediscache"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redisrate"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
	"github.com/tech-log/tech-log-backend/shared-contract/cache"
	"github.com/tech-log/tech-log-backend/shared-contract/keyspace"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// aclRateUser and aclCacheUser are the least-privilege ACL users of
// docs/operations.md, word for word (redistest.DocumentedACLUser; the
// passwords are test values). Every command the Lua programs run is
// checked against the caller's ACL too, hence GET/SET/TIME (the state) and
// the dedup hash's commands for the rate user and GETRANGE/SET for the
// cache user's script.
func aclRateUser(t testing.TB) []any {
	return redistest.DocumentedACLUser(t, "tlb-rate", "rate-test-pass")
}

func aclCacheUser(t testing.TB) []any {
	return redistest.DocumentedACLUser(t, "tlb-cache", "cache-test-pass")
}

func userClient(t *testing.T, addr, user, pass string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, Username: user, Password: pass, Protocol: 2, MaxRetries: -1, DisableIdentity: true})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func requireNoPerm(t *testing.T, err error, what string) {
	t.Helper()
	require.Error(t, err, what)
	assert.True(t, strings.HasPrefix(err.Error(), "NOPERM"), "%s: %v", what, err)
}

// TestACLLeastPrivilegeUsers: the provider works as the rate user (Start,
// EVALSHA, the NOSCRIPT fallback EVAL), the cache store works as the cache
// user, and neither user can touch the other's keys or run anything else.
func TestACLLeastPrivilegeUsers(t *testing.T) {
	srv := redistest.Start(t)
	ownServer(t, srv)
	admin := srv.Client()
	require.NoError(t, admin.Do(redistest.AdminCtx(t), aclRateUser(t)...).Err())
	require.NoError(t, admin.Do(redistest.AdminCtx(t), aclCacheUser(t)...).Err())
	t.Cleanup(func() { _ = admin.Do(context.Background(), "ACL", "DELUSER", "tlb-rate", "tlb-cache").Err() })

	secret, err := keyspace.NewSecret([]byte("acl-lane-secret-0123456789abcdef"))
	require.NoError(t, err)
	keys, err := keyspace.NewBuilder("tlb", secret)
	require.NoError(t, err)
	pols := hourPolicies(t)

	// The provider as tlb-rate.
	cfg := clientConfig(srv.Addr(), 2*time.Second, 4)
	cfg.Username, cfg.Password, cfg.ClientName = "tlb-rate", "rate-test-pass", "tlb-rate-acl-test"
	p := newProvider(t, cfg, keys, pols...)
	subject := randomSubject(t)
	for _, pol := range pols {
		out := ask(p, pol.ID(), subject, 1)
		require.True(t, ratelimit.Admitted(out), "%s as tlb-rate: %v", pol.ID(), out)
	}
	// The dedup programs as tlb-rate: a full dedup hash (record, evict,
	// replay, a spent ID charged) needs only the documented commands.
	ddPol, err := ratelimit.NewPolicy(ratelimit.PolicySpec{ID: "acl-dedup", Revision: 1, Algorithm: ratelimit.AlgorithmFixedWindow,
		Params: ratelimit.FixedWindow{Limit: 1000, Window: time.Hour}, MaxCost: 1, CleanupGrace: time.Minute,
		FailurePolicy: ratelimit.FailClosed, DedupWindow: time.Minute})
	require.NoError(t, err)
	dd := newProvider(t, cfg, keys, ddPol)
	ddSubject := randomSubject(t)
	for i := range programs.DedupMaxEntries + 2 {
		id := ratelimit.EvaluationID("acl-" + strconv.Itoa(i))
		for range 3 { // record (evicting once full), replay, then charge (spent)
			out := dd.Evaluate(context.Background(), ratelimit.Request{PolicyID: ddPol.ID(), SubjectDigest: ddSubject, Cost: 1, EvaluationID: id, Deadline: time.Now().Add(30 * time.Second)})
			require.True(t, ratelimit.Admitted(out), "dedup as tlb-rate: %v", out)
		}
	}
	require.NoError(t, admin.ScriptFlush(redistest.AdminCtx(t)).Err())
	out := ask(p, pols[0].ID(), subject, 1)
	require.True(t, ratelimit.Admitted(out), "NOSCRIPT fallback EVAL as tlb-rate: %v", out)
	assert.Equal(t, int64(3), out.(ratelimit.Evaluated).Decision.Remaining)
	rateKey, err := redisrate.StateKey(keys, pols[0], subject)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(rateKey, "tlb:rate:"), rateKey)

	// The server-policy checks as tlb-rate: INFO (replication,
	// persistence) and CONFIG GET (maxmemory-policy, save).
	checked, err := redisrate.NewClient(cfg)
	require.NoError(t, err)
	cp, err := redisrate.New(checked, keys, pols, redisrate.Options{CommandTimeout: cfg.CommandTimeout, MaxInFlight: cfg.PoolSize, ServerChecks: &redisrate.ServerChecks{}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cp.Close() })
	require.NoError(t, cp.Start(redistest.AdminCtx(t)), "server-policy checks as tlb-rate")
	require.NoError(t, cp.Ready(redistest.AdminCtx(t)))
	st, ok := cp.ServerStatus()
	require.True(t, ok)
	assert.Equal(t, "master", st.Role)
	assert.Equal(t, redisrate.EvictionPolicyNone, st.EvictionPolicy)

	// The cache store as tlb-cache.
	ccfg := rediscache.DefaultConfig(srv.Addr())
	ccfg.Username, ccfg.Password = "tlb-cache", "cache-test-pass"
	cclient, err := rediscache.NewClient(ccfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cclient.Close() })
	store, err := rediscache.New(cclient, keys)
	require.NoError(t, err)
	ctx := redistest.AdminCtx(t)
	ck := cache.Key{Region: "acl", Kind: "item", Name: "one"}
	require.NoError(t, store.Set(ctx, ck, []byte("v1"), time.Minute))
	e, ok, err := store.Get(ctx, ck)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, []byte("v1"), e.Value)
	replaced, err := store.CompareAndReplace(ctx, ck, e.Token, []byte("v2"), time.Minute)
	require.NoError(t, err)
	assert.True(t, replaced, "the cache's compare-and-replace script runs as tlb-cache")
	cacheKeys, err := admin.Keys(ctx, "tlb:cache:*").Result()
	require.NoError(t, err)
	require.Len(t, cacheKeys, 1)
	cacheKey := cacheKeys[0]

	rate := userClient(t, srv.Addr(), "tlb-rate", "rate-test-pass")
	cacheC := userClient(t, srv.Addr(), "tlb-cache", "cache-test-pass")
	sha := programs.All()[0].SHA1
	t.Run("cache user cannot touch rate keys", func(t *testing.T) {
		requireNoPerm(t, cacheC.HGetAll(ctx, rateKey).Err(), "HGETALL rate key")
		requireNoPerm(t, cacheC.Del(ctx, rateKey).Err(), "DEL rate key")
		requireNoPerm(t, cacheC.Set(ctx, rateKey, "x", 0).Err(), "SET rate key")
		requireNoPerm(t, cacheC.EvalSha(ctx, sha, []string{rateKey}, "1").Err(), "EVALSHA on a rate key")
		requireNoPerm(t, cacheC.Eval(ctx, "return redis.call('HGETALL', KEYS[1])", []string{rateKey}).Err(), "EVAL on a rate key")
	})
	t.Run("rate user cannot touch cache keys", func(t *testing.T) {
		requireNoPerm(t, rate.GetRange(ctx, cacheKey, 0, -1).Err(), "GETRANGE cache key")
		requireNoPerm(t, rate.Set(ctx, cacheKey, "x", 0).Err(), "SET cache key")
		requireNoPerm(t, rate.Del(ctx, cacheKey).Err(), "DEL cache key")
		requireNoPerm(t, rate.Eval(ctx, "return redis.call('HGETALL', KEYS[1])", []string{cacheKey}).Err(), "EVAL on a cache key")
	})
	// ACL cannot tell a command inside a script from a direct one: the rate
	// user may GET/SET (and the dedup hash commands) on its own keys directly
	// (documented).
	t.Run("rate user runs nothing else", func(t *testing.T) {
		requireNoPerm(t, rate.Del(ctx, rateKey).Err(), "DEL its own key")
		requireNoPerm(t, rate.FlushAll(ctx).Err(), "FLUSHALL")
		requireNoPerm(t, rate.ConfigSet(ctx, "maxmemory-policy", "allkeys-lru").Err(), "CONFIG SET")
		requireNoPerm(t, rate.ConfigResetStat(ctx).Err(), "CONFIG RESETSTAT")
		requireNoPerm(t, rate.Keys(ctx, "*").Err(), "KEYS")
		requireNoPerm(t, rate.ScriptFlush(ctx).Err(), "SCRIPT FLUSH")
		requireNoPerm(t, rate.Do(ctx, "ACL", "WHOAMI").Err(), "ACL")
	})
	// Nothing of the refused commands changed the state.
	c, ok := consumed(t, admin, keys, pols[0], subject)
	require.True(t, ok)
	assert.Equal(t, int64(2), c)
}
