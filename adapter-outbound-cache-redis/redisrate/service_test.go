package redisrate

// The Redis service lane: every test here runs against a private
// redis-server started by redistest (skipped under -short or without a
// server, failed under REDIS_REQUIRED=1).

import (
	"context"
	"errors"
	mrand "math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/internal/send"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/programs"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
	"github.com/tech-log/tech-log-backend/shared-contract/keyspace"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit/ratelimittest"
)

// serviceTimeout is the command timeout of the service lane: generous for
// two noisy cores under -race.
const serviceTimeout = 500 * time.Millisecond

func serviceConfig(srv *redistest.Server) ClientConfig {
	return ClientConfig{
		Addr:           srv.Addr(),
		Protocol:       ProtocolRESP2,
		CommandTimeout: serviceTimeout,
		DialTimeout:    serviceTimeout,
		PoolSize:       16,
		PoolTimeout:    200 * time.Millisecond,
	}
}

// randomKeys is the test's own corner of the keyspace (redistest).
func randomKeys(t testing.TB) *keyspace.Builder { return redistest.RandomKeys(t) }

// serviceProvider builds and starts a Provider on srv; mutate adjusts the
// client config first.
func serviceProvider(t testing.TB, srv *redistest.Server, keys *keyspace.Builder, policies []ratelimit.Policy, mutate func(*ClientConfig)) *Provider {
	t.Helper()
	cfg := serviceConfig(srv)
	if mutate != nil {
		mutate(&cfg)
	}
	client, err := NewClient(cfg)
	require.NoError(t, err)
	p, err := New(client, keys, policies, Options{CommandTimeout: cfg.CommandTimeout, MaxInFlight: cfg.PoolSize})
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, p.Start(ctx))
	return p
}

// ownServer skips tests that reconfigure or fault the server on the
// external lane, which is shared.
func ownServer(t testing.TB, srv *redistest.Server) {
	t.Helper()
	if srv.Lane() == redistest.LaneExternal {
		t.Skip("reconfigures the server: not on the external lane")
	}
}

// commandCalls returns the calls of cmd in INFO commandstats (redistest
// reads it with redisinfo).
func commandCalls(t testing.TB, admin *redis.Client, cmd string) int {
	t.Helper()
	return int(redistest.CommandStats(t, admin)[cmd].Calls)
}

func TestServiceStartLoadsEveryProgram(t *testing.T) {
	srv := redistest.Start(t)
	pols := conformancePolicies(t, 1)
	p := serviceProvider(t, srv, randomKeys(t), pols, nil)
	var shas []string
	var want []bool
	for _, pol := range pols {
		prog, err := programs.Bind(pol)
		require.NoError(t, err)
		shas, want = append(shas, prog.SHA1), append(want, true)
	}
	exists, err := srv.Client().ScriptExists(redistest.AdminCtx(t), shas...).Result()
	require.NoError(t, err)
	assert.Equal(t, want, exists, "every policy's bound program is loaded (ADR 0030)")
	require.NoError(t, p.Ready(redistest.AdminCtx(t)))
	require.NoError(t, p.Close())
	assert.ErrorIs(t, p.Ready(redistest.AdminCtx(t)), ErrClosed)
	assert.Equal(t, ratelimit.CategoryClosed, ratelimit.CategoryOf(ask(p, "c-fixed", randomSubject(t), 1)))
}

// TestConformanceRedis runs the EdgePort conformance suite against the
// provider on a real server.
func TestConformanceRedis(t *testing.T) {
	srv := redistest.Start(t)
	keys := randomKeys(t)
	ratelimittest.Run(t, func(t *testing.T, policies []ratelimit.Policy) ratelimit.EdgePort {
		return serviceProvider(t, srv, keys, policies, nil)
	})
}

// TestConformanceSetsRedis runs the set conformance suite (RunSets) against the
// provider on a real server (every member in one set-program call).
func TestConformanceSetsRedis(t *testing.T) {
	srv := redistest.Start(t)
	keys := randomKeys(t)
	ratelimittest.RunSets(t, func(t *testing.T, policies []ratelimit.Policy) ratelimit.EdgePort {
		return serviceProvider(t, srv, keys, policies, nil)
	})
}

// TestServiceProgramsMatchModel is the differential test through the
// provider's executor and parser: on seeded random sequences of costs and
// real time steps, each reply equals the model's for the server time the
// program reports, the stored hash equals the model's state and the TTL is
// the model's expiry.
func TestServiceProgramsMatchModel(t *testing.T) {
	srv := redistest.Start(t)
	policies := []ratelimit.Policy{
		mustPolicy(t, ratelimit.PolicySpec{ID: "d-fixed", Params: ratelimit.FixedWindow{Limit: 6, Window: 40 * time.Millisecond}, MaxCost: 4, MaxClockRegression: time.Second}),
		mustPolicy(t, ratelimit.PolicySpec{ID: "d-sliding", Params: ratelimit.SlidingWindowCounter{Limit: 6, Window: 40 * time.Millisecond}, MaxCost: 4, MaxClockRegression: time.Second}),
		mustPolicy(t, ratelimit.PolicySpec{ID: "d-bucket", Params: ratelimit.TokenBucket{Capacity: 6, RefillTokens: 2, RefillPeriod: 15 * time.Millisecond}, MaxCost: 4, MaxClockRegression: time.Second}),
	}
	keys := randomKeys(t)
	p := serviceProvider(t, srv, keys, policies, nil)
	admin := srv.Client()
	for i, pol := range policies {
		t.Run(pol.Algorithm().String(), func(t *testing.T) {
			rng := mrand.New(mrand.NewPCG(uint64(i)+1, 42))
			ps := p.policies[pol.ID()]
			key, err := StateKey(keys, pol, randomSubject(t))
			require.NoError(t, err)
			var model programs.State
			statuses := map[programs.Status]int{}
			for step := 0; step < 150; step++ {
				if rng.IntN(3) == 0 {
					time.Sleep(time.Duration(rng.IntN(12)) * time.Millisecond)
				}
				cost := 1 + rng.Int64N(pol.MaxCost())
				a, ok := p.exec.Run(context.Background(), send.Call{Script: ps.script, Key: key, Argv: ps.boundArgv, Cost: cost, CostArg: programs.ArgCost, SendBy: noSendBy}).(send.Replied)
				require.True(t, ok, "step %d", step)
				require.NoError(t, a.Err, "step %d", step)
				got, err := programs.Decode(a.Reply, pol)
				require.NoError(t, err, "step %d", step)
				want, next := programs.Evaluate(pol, model, got.ServerNowMillis, cost)
				require.Equal(t, want, got, "step %d cost %d", step, cost)
				model = next
				statuses[got.Status]++

				assert.Equal(t, model, storedState(t, admin, key), "step %d state", step)
				if got.Status == programs.StatusAllowed {
					ttl, err := admin.PTTL(redistest.AdminCtx(t), key).Result()
					require.NoError(t, err)
					assert.Positive(t, ttl, "step %d: finite TTL set", step)
					assert.LessOrEqual(t, ttl, programs.Millis(got.ExpiryMillis(pol)), "step %d TTL", step)
				}
			}
			assert.Positive(t, statuses[programs.StatusAllowed])
			assert.Positive(t, statuses[programs.StatusDenied], "the sequence reached the limit")
		})
	}
}

// TestServiceDenialWritesNothing: a denial through the provider leaves the
// hash byte-identical and the TTL not extended.
func TestServiceDenialWritesNothing(t *testing.T) {
	srv := redistest.Start(t)
	keys := randomKeys(t)
	p := serviceProvider(t, srv, keys, conformancePolicies(t, 1), nil)
	for _, pol := range conformancePolicies(t, 1) {
		t.Run(pol.Algorithm().String(), func(t *testing.T) {
			subject := randomSubject(t)
			key, err := StateKey(keys, pol, subject)
			require.NoError(t, err)
			require.True(t, ratelimit.Admitted(ask(p, pol.ID(), subject, 4)))
			before := storedState(t, srv.Client(), key)
			ttlBefore, err := srv.Client().PTTL(redistest.AdminCtx(t), key).Result()
			require.NoError(t, err)
			out := ask(p, pol.ID(), subject, 2)
			e, ok := out.(ratelimit.Evaluated)
			require.True(t, ok, "%v", out)
			require.False(t, e.Decision.Allowed)
			after := storedState(t, srv.Client(), key)
			ttlAfter, err := srv.Client().PTTL(redistest.AdminCtx(t), key).Result()
			require.NoError(t, err)
			assert.Equal(t, before, after)
			assert.LessOrEqual(t, ttlAfter, ttlBefore, "TTL not refreshed by a denial")
			require.True(t, ratelimit.Admitted(ask(p, pol.ID(), subject, 1)), "the exact remaining unit is still there")
		})
	}
}

// TestServiceKeysArePrivateAndExpire scans the test's keyspace: every key is
// a rate key of the canonical form, holds no subject, is a hash and has a
// finite TTL within the policy horizon plus grace.
func TestServiceKeysArePrivateAndExpire(t *testing.T) {
	srv := redistest.Start(t)
	keys := randomKeys(t)
	policies := conformancePolicies(t, 1)
	p := serviceProvider(t, srv, keys, policies, nil)
	var subjects []ratelimit.SubjectDigest
	for i := 0; i < 5; i++ {
		s := randomSubject(t)
		subjects = append(subjects, s)
		for _, pol := range policies {
			require.True(t, ratelimit.Admitted(ask(p, pol.ID(), s, 1)))
		}
	}
	admin := srv.Client()
	var found []string
	iter := admin.Scan(redistest.AdminCtx(t), 0, keys.Pattern(KeyCapability), 100).Iterator()
	for iter.Next(redistest.AdminCtx(t)) {
		found = append(found, iter.Val())
	}
	require.NoError(t, iter.Err())
	require.Len(t, found, len(subjects)*len(policies))
	for _, key := range found {
		for _, s := range subjects {
			assert.NotContains(t, key, string(s))
		}
		parts := strings.Split(key, ":")
		require.Len(t, parts, 6, key)
		assert.Equal(t, []string{keys.Prefix(), KeyCapability}, parts[:2])
		assert.Equal(t, KeyKind, parts[3])
		assert.Equal(t, keyspace.TaggedVersion, parts[4])
		assert.Regexp(t, `^\{[A-Za-z0-9_-]{3}\}[A-Za-z0-9_-]{22}$`, parts[5])
		typ, err := admin.Type(redistest.AdminCtx(t), key).Result()
		require.NoError(t, err)
		assert.Equal(t, "string", typ)
		ttl, err := admin.PTTL(redistest.AdminCtx(t), key).Result()
		require.NoError(t, err)
		assert.Positive(t, ttl, "finite TTL on %s", key)
		assert.LessOrEqual(t, ttl, 2*time.Hour+time.Minute, "TTL within horizon + grace")
	}
}

// TestServiceConcurrentClientsNeverOverAdmit: 64 goroutines on two separate
// clients hammer one key across several fixed windows; no window admits more
// than the limit.
func TestServiceConcurrentClientsNeverOverAdmit(t *testing.T) {
	srv := redistest.Start(t)
	keys := randomKeys(t)
	const limit = 10
	pol := mustPolicy(t, ratelimit.PolicySpec{ID: "hot", Params: ratelimit.FixedWindow{Limit: limit, Window: 100 * time.Millisecond}, MaxCost: 2, MaxClockRegression: time.Second})
	big := func(c *ClientConfig) { c.PoolSize = 32 }
	providers := []*Provider{
		serviceProvider(t, srv, keys, []ratelimit.Policy{pol}, big),
		serviceProvider(t, srv, keys, []ratelimit.Policy{pol}, big),
	}
	subject := randomSubject(t)
	var (
		mu        sync.Mutex
		perWindow = map[int64]int64{} // window end (ResetAt) -> units admitted
		outcomes  = map[ratelimit.OutcomeKind]int{}
		wg        sync.WaitGroup
	)
	stop := time.Now().Add(1200 * time.Millisecond)
	for g := 0; g < 64; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := providers[g%2]
			for i := 0; i < 400 && time.Now().Before(stop); i++ {
				cost := int64(1 + (g+i)%2)
				out := ask(p, pol.ID(), subject, cost)
				mu.Lock()
				outcomes[out.Kind()]++
				if ratelimit.Admitted(out) {
					perWindow[out.(ratelimit.Evaluated).Decision.ResetAt.UnixMilli()] += cost
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	require.NotEmpty(t, perWindow)
	full := 0
	for end, n := range perWindow {
		assert.LessOrEqual(t, n, int64(limit), "window ending %d", end)
		if n == limit {
			full++
		}
	}
	assert.Positive(t, full, "contention reached the limit in some window")
	assert.GreaterOrEqual(t, len(perWindow), 3, "several windows")
	assert.Positive(t, outcomes[ratelimit.KindEvaluated])
	t.Logf("windows %d (full %d), outcomes %v", len(perWindow), full, outcomes)
}

// step is one request of a sequence and the decision it must get.
type step struct {
	cost      int64
	allowed   bool
	remaining int64
}

func runSteps(t *testing.T, port ratelimit.EdgePort, p ratelimit.Policy, subject ratelimit.SubjectDigest, steps []step) {
	t.Helper()
	for i, s := range steps {
		out := ask(port, p.ID(), subject, s.cost)
		e, ok := out.(ratelimit.Evaluated)
		require.True(t, ok, "step %d: %v", i, out)
		assert.Equal(t, s.allowed, e.Decision.Allowed, "step %d allowed", i)
		assert.Equal(t, s.remaining, e.Decision.Remaining, "step %d remaining", i)
	}
}

// storedState is the state value at key (nil when the key is absent).
func storedState(t *testing.T, c redis.Cmdable, key string) programs.State {
	t.Helper()
	v, err := c.Get(redistest.AdminCtx(t), key).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil
	}
	require.NoError(t, err)
	return programs.State(v)
}
