package reliability_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redisrate"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
	"github.com/tech-log/tech-log-backend/shared-contract/keyspace"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit/ratelimittest"
)

// fallbackInstance is one service instance: a provider with a breaker and
// the local emergency fallback over it.
type fallbackInstance struct {
	p  *redisrate.Provider
	fb *redisrate.Fallback
}

func newFallbackInstance(t *testing.T, addr string, keys *keyspace.Builder, pols []ratelimit.Policy) fallbackInstance {
	t.Helper()
	client, err := redisrate.NewClient(clientConfig(addr, faultTimeout, 4))
	require.NoError(t, err)
	p, err := redisrate.New(client, keys, pols, redisrate.Options{
		CommandTimeout: faultTimeout, MaxInFlight: 4,
		Breaker: redisrate.BreakerOptions{Threshold: 1, ProbeInterval: 100 * time.Millisecond},
	})
	require.NoError(t, err)
	fb, err := redisrate.NewFallback(p, redisrate.FallbackOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		fb.Close()
		_ = p.Close()
	})
	require.NoError(t, p.Start(adminCtx(t)))
	return fallbackInstance{p, fb}
}

// fallbackPolicies are one local-fallback policy per algorithm, limit 10
// per hour shared by 2 instances (share 5 each).
func fallbackPolicies(t *testing.T) []ratelimit.Policy {
	var out []ratelimit.Policy
	for _, params := range []ratelimit.Params{
		ratelimit.FixedWindow{Limit: 10, Window: time.Hour},
		ratelimit.SlidingWindowCounter{Limit: 10, Window: time.Hour},
		ratelimit.TokenBucket{Capacity: 10, RefillTokens: 1, RefillPeriod: time.Hour},
	} {
		p, err := ratelimit.NewPolicy(ratelimit.PolicySpec{
			ID: ratelimit.PolicyID("lf-" + params.Algorithm().String()), Revision: 1, Algorithm: params.Algorithm(), Params: params,
			MaxCost: 1, CleanupGrace: time.Minute, MaxClockRegression: 2 * time.Second,
			FailurePolicy: ratelimit.LocalFallback, FallbackInstances: 2,
		})
		require.NoError(t, err)
		out = append(out, p)
	}
	ratelimittest.ClearOfWindowEnd(t, time.Hour, time.Minute) // exact counts in one hour window
	return out
}

// TestFallbackOutageTwoInstancesReconciled (issue 14 section 2): one
// subject, two instances, limit 10 per hour shared by 2 (share 5), each
// algorithm.
//  1. Before the outage instance A admits 2 globally.
//  2. Outage (the proxy stops: connect refused, connections cut): A and B
//     decide locally, LocalEmergency: 5 admits each, then denials.
//  3. Redis returns: both breakers close and reconcile in the background.
//  4. The global state holds min(limit, 2 + 5 + 5) = 10 consumed (the
//     charge saturates) and the next global decision is a denial: the
//     outage granted 10 locally, and no fresh limit follows.
//
// A second subject admitted 3 only on A during the outage: after
// reconciliation the global state has 3 and admits exactly 7 more.
func TestFallbackOutageTwoInstancesReconciled(t *testing.T) {
	srv := redistest.Start(t)
	admin := srv.Client()
	proxy := startProxy(t, srv.Addr())
	keys := randomKeys(t)
	pols := fallbackPolicies(t)
	// Hour windows: keep the run away from an hour boundary (local and
	// global windows are both epoch-aligned).
	if left := time.Hour - time.Duration(time.Now().UnixMilli()%time.Hour.Milliseconds())*time.Millisecond; left < 30*time.Second {
		time.Sleep(left + time.Second)
	}
	a := newFallbackInstance(t, proxy.Listen, keys, pols)
	b := newFallbackInstance(t, proxy.Listen, keys, pols)
	s1, s2 := randomSubject(t), randomSubject(t)
	for _, pol := range pols {
		for range 2 {
			out := ask(a.fb, pol.ID(), s1, 1)
			require.True(t, ratelimit.Admitted(out), "%v", out)
			require.Equal(t, ratelimit.GlobalRedis, out.(ratelimit.Evaluated).Decision.Source)
		}
	}

	proxy.Stop()
	for _, pol := range pols {
		for name, in := range map[string]fallbackInstance{"A": a, "B": b} {
			admitted, denied := 0, false
			for i := 0; i < 30 && !denied; i++ {
				out := ask(in.fb, pol.ID(), s1, 1)
				ev, ok := out.(ratelimit.Evaluated)
				if !ok {
					// A pooled connection cut by the proxy may surface once
					// as Indeterminate (written, then lost): fail-closed,
					// never local.
					require.Equal(t, ratelimit.KindIndeterminate, out.Kind(), "%s %s call %d: %v", name, pol.ID(), i, out)
					continue
				}
				require.Equal(t, ratelimit.LocalEmergency, ev.Decision.Source)
				require.Equal(t, ratelimit.ApproximateLocal, ev.Decision.Certainty)
				require.Equal(t, int64(5), ev.Decision.Limit, "the share")
				if ev.Decision.Allowed {
					admitted++
				} else {
					denied = true
				}
			}
			assert.Equal(t, 5, admitted, "%s %s: the share", name, pol.ID())
		}
		for range 3 {
			require.True(t, ratelimit.Admitted(ask(a.fb, pol.ID(), s2, 1)))
		}
	}
	assert.Equal(t, map[ratelimit.PolicyID]int64{pols[0].ID(): 8, pols[1].ID(): 8, pols[2].ID(): 8}, a.fb.Pending())
	assert.Equal(t, map[ratelimit.PolicyID]int64{pols[0].ID(): 5, pols[1].ID(): 5, pols[2].ID(): 5}, b.fb.Pending())

	require.NoError(t, proxy.Start())
	deadline := time.Now().Add(15 * time.Second)
	for len(a.fb.Pending())+len(b.fb.Pending()) > 0 {
		require.True(t, time.Now().Before(deadline), "not reconciled: A %v B %v (breakers %s %s)",
			a.fb.Pending(), b.fb.Pending(), a.p.BreakerState(), b.p.BreakerState())
		time.Sleep(20 * time.Millisecond)
	}
	for _, pol := range pols {
		c, ok := consumed(t, admin, keys, pol, s1)
		require.True(t, ok)
		assert.Equal(t, int64(10), c, "%s: 2 global + 5 + 5 local, saturated at the limit", pol.ID())
		c, ok = consumed(t, admin, keys, pol, s2)
		require.True(t, ok)
		assert.Equal(t, int64(3), c, "%s: the 3 local admits of the second subject", pol.ID())

		out := ask(b.fb, pol.ID(), s1, 1)
		require.Equal(t, ratelimit.KindEvaluated, out.Kind(), "%v", out)
		assert.False(t, out.(ratelimit.Evaluated).Decision.Allowed, "%s: no fresh limit after the outage", pol.ID())
		assert.Equal(t, ratelimit.GlobalRedis, out.(ratelimit.Evaluated).Decision.Source)
		more := 0
		for range 12 {
			if ratelimit.Admitted(ask(a.fb, pol.ID(), s2, 1)) {
				more++
			}
		}
		assert.Equal(t, 7, more, "%s: the second subject gets the rest of the limit, globally", pol.ID())
	}
}
