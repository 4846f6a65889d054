package reliability_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/ratefallback"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redisrate"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
	"github.com/tech-log/tech-log-backend/shared-contract/keyspace"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit/ratelimittest"
)

// fallbackInstance is one service instance at the service's defaults: a
// provider with the default timeouts, breaker and pipelining, and the
// local emergency fallback over it.
type fallbackInstance struct {
	p  *redisrate.Provider
	fb *ratefallback.Fallback
}

// fallbackPool is the pool size of a fallback instance's client: a pooled
// connection the proxy cut can surface once as Indeterminate (written,
// then lost) before it is dropped, so an outage shows at most this many.
const fallbackPool = 8

func newFallbackInstance(t *testing.T, addr string, keys *keyspace.Builder, pols []ratelimit.Policy) fallbackInstance {
	t.Helper()
	cfg := clientConfig(addr, redisrate.DefaultCommandTimeout, fallbackPool)
	cfg.DialTimeout = redisrate.DefaultDialTimeout
	client, err := redisrate.NewClient(cfg)
	require.NoError(t, err)
	p, err := redisrate.New(client, keys, pols, redisrate.Options{
		CommandTimeout: redisrate.DefaultCommandTimeout, MaxInFlight: 8, PipelineMaxBatch: lanePipelineBatch,
		Breaker: redisrate.BreakerOptions{Threshold: redisrate.DefaultBreakerThreshold, ProbeInterval: redisrate.DefaultBreakerProbeInterval},
	})
	require.NoError(t, err)
	fb, err := ratefallback.New(p, ratefallback.Options{Policies: pols, CommandTimeout: redisrate.DefaultCommandTimeout})
	require.NoError(t, err)
	t.Cleanup(func() {
		fb.Close()
		_ = p.Close()
	})
	require.NoError(t, p.Start(redistest.AdminCtx(t)))
	return fallbackInstance{p, fb}
}

// pending is in's uncharged local admissions per policy (0 omitted).
func (in fallbackInstance) pending() map[ratelimit.PolicyID]int64 {
	out := map[ratelimit.PolicyID]int64{}
	for id, n := range in.fb.Stats().Pending {
		if n > 0 {
			out[id] = n
		}
	}
	return out
}

// askDefault asks with the service's derived evaluation deadline.
func askDefault(p ratelimit.EdgePort, id ratelimit.PolicyID, subject ratelimit.SubjectDigest) ratelimit.Outcome {
	return p.Evaluate(context.Background(), ratelimit.Request{PolicyID: id, SubjectDigest: subject, Cost: 1,
		Deadline: time.Now().Add(redisrate.EvaluationTimeout(redisrate.DefaultCommandTimeout, false))})
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
//  3. Redis returns: the background passes charge what is pending (no
//     request carries it here).
//  4. The global state holds min(limit, 2 + 5 + 5) = 10 consumed (the
//     charge saturates) and the next global decision is a denial: the
//     outage granted 10 locally, and no fresh limit follows.
//
// A second subject admitted 3 only on A during the outage: after
// reconciliation the global state has 3 + 5 (A cannot know what B
// admitted, so its charge reserves B's share; ADR 0017) and admits
// exactly 2 more.
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
			admitted, denied, lost := 0, false, 0
			for i := 0; i < 30 && !denied; i++ {
				out := ask(in.fb, pol.ID(), s1, 1)
				ev, ok := out.(ratelimit.Evaluated)
				if !ok {
					// A pooled connection cut by the proxy may surface once
					// as Indeterminate (written, then lost): fail-closed,
					// never local.
					require.Equal(t, ratelimit.KindIndeterminate, out.Kind(), "%s %s call %d: %v", name, pol.ID(), i, out)
					lost++
					require.LessOrEqual(t, lost, fallbackPool, "%s %s: at most once per pooled connection", name, pol.ID())
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
	assert.Equal(t, map[ratelimit.PolicyID]int64{pols[0].ID(): 8, pols[1].ID(): 8, pols[2].ID(): 8}, a.pending())
	assert.Equal(t, map[ratelimit.PolicyID]int64{pols[0].ID(): 5, pols[1].ID(): 5, pols[2].ID(): 5}, b.pending())

	require.NoError(t, proxy.Start())
	deadline := time.Now().Add(15 * time.Second)
	for len(a.pending())+len(b.pending()) > 0 {
		require.True(t, time.Now().Before(deadline), "not reconciled: A %v B %v (breakers %s %s)",
			a.pending(), b.pending(), a.p.BreakerState(), b.p.BreakerState())
		time.Sleep(20 * time.Millisecond)
	}
	for _, pol := range pols {
		c, ok := consumed(t, admin, keys, pol, s1)
		require.True(t, ok)
		assert.Equal(t, int64(10), c, "%s: 2 global + 5 + 5 local, saturated at the limit", pol.ID())
		c, ok = consumed(t, admin, keys, pol, s2)
		require.True(t, ok)
		assert.Equal(t, int64(8), c, "%s: the 3 local admits of the second subject and B's reserved share 5 (ADR 0017)", pol.ID())

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
		assert.Equal(t, 2, more, "%s: the second subject gets the rest of the limit, globally", pol.ID())
	}
}

// TestFallbackRecoveryBoundAtDefaults is issue 20's proof that the bound of
// docs/degraded-mode.md holds from the first decision after recovery, at
// the service's defaults (command and dial timeouts, breaker threshold
// and probe interval, pipelining, the derived deadline): limit 10 per hour
// shared by 2 instances (share 5), per algorithm. A admits 2 globally;
// Redis goes (the proxy stops); A and B admit their shares locally (5 + 5)
// and deny; Redis returns and, with no pause, both instances hammer the
// subject from 4 goroutines each until each has had global decisions.
// The bound (fixed window and sliding counter: max(L, U + A) = 12; token
// bucket: max(A, min(C, x + rT)) = 10 from the outage's start, the refill
// of 1 per hour being nil) allows no admission after recovery: not one
// may happen. Each instance's first global decision carries its pending
// charge and the other instance's reserved share in the same round trip.
func TestFallbackRecoveryBoundAtDefaults(t *testing.T) {
	srv := redistest.Start(t)
	admin := srv.Client()
	proxy := startProxy(t, srv.Addr())
	keys := randomKeys(t)
	pols := fallbackPolicies(t)
	// Hour windows: keep the run away from an hour boundary (local and
	// global windows are both epoch-aligned), so no fresh window can admit.
	if left := time.Hour - time.Duration(time.Now().UnixMilli()%time.Hour.Milliseconds())*time.Millisecond; left < 30*time.Second {
		time.Sleep(left + time.Second)
	}
	for _, pol := range pols {
		t.Run(pol.Algorithm().String(), func(t *testing.T) {
			a := newFallbackInstance(t, proxy.Listen, keys, pols)
			b := newFallbackInstance(t, proxy.Listen, keys, pols)
			subject := randomSubject(t)
			for range 2 {
				out := askDefault(a.fb, pol.ID(), subject)
				require.True(t, ratelimit.Admitted(out), "%v", out)
			}
			require.True(t, ratelimit.Admitted(askDefault(b.fb, pol.ID(), randomSubject(t))), "warm B")

			proxy.Stop()
			for name, in := range map[string]fallbackInstance{"A": a, "B": b} {
				admitted, denied, lost := 0, false, 0
				for i := 0; i < 30 && !denied; i++ {
					out := askDefault(in.fb, pol.ID(), subject)
					ev, ok := out.(ratelimit.Evaluated)
					if !ok {
						// A cut pooled connection, once each (fallbackPool).
						require.Equal(t, ratelimit.KindIndeterminate, out.Kind(), "%s call %d: %v", name, i, out)
						lost++
						require.LessOrEqual(t, lost, fallbackPool, "%s: at most once per pooled connection", name)
						continue
					}
					require.Equal(t, ratelimit.LocalEmergency, ev.Decision.Source)
					if ev.Decision.Allowed {
						admitted++
					} else {
						denied = true
					}
				}
				require.Equal(t, 5, admitted, "%s: the share", name)
			}
			require.NoError(t, proxy.Start())

			// No pause: both instances at once, 4 goroutines each.
			var after, global [2]atomic.Int64
			var mu sync.Mutex
			undecided := map[string]int{} // outcomes that are no decision, by kind and category
			var wg sync.WaitGroup
			stop := time.Now().Add(15 * time.Second)
			for i, in := range []fallbackInstance{a, b} {
				for range 4 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for n := 0; n < 2000 && time.Now().Before(stop) && (global[0].Load() < 20 || global[1].Load() < 20); n++ {
							out := askDefault(in.fb, pol.ID(), subject)
							if ratelimit.Admitted(out) {
								after[i].Add(1)
							}
							ev, ok := out.(ratelimit.Evaluated)
							if ok && ev.Decision.Source == ratelimit.GlobalRedis {
								global[i].Add(1)
							}
							if !ok {
								mu.Lock()
								undecided[fmt.Sprintf("%v/%v", out.Kind(), ratelimit.CategoryOf(out))]++
								mu.Unlock()
							}
							time.Sleep(time.Millisecond)
						}
					}()
				}
			}
			wg.Wait()
			t.Logf("after recovery: admitted A %d B %d; global decisions A %d B %d; no decision %v", after[0].Load(), after[1].Load(), global[0].Load(), global[1].Load(), undecided)
			require.GreaterOrEqual(t, global[0].Load(), int64(20), "A decided globally after recovery, within the bounds")
			require.GreaterOrEqual(t, global[1].Load(), int64(20), "B decided globally after recovery, within the bounds")
			// No decision is no admission, so the bound is unaffected; but
			// only what the design allows right after recovery may happen:
			// a request that waited for the charge past its deadline, or a
			// reply later than the default command timeout (loaded
			// machine). Measured: none in 6 runs.
			for k := range undecided {
				assert.Contains(t, []string{
					fmt.Sprintf("%v/%v", ratelimit.KindUnavailable, ratelimit.CategoryDeadline),
					fmt.Sprintf("%v/%v", ratelimit.KindIndeterminate, ratelimit.CategoryTimeout),
				}, k, "after recovery: %v", undecided)
			}
			assert.Zero(t, after[0].Load()+after[1].Load(), "admissions beyond the bound after recovery")
			c, ok := consumed(t, admin, keys, pol, subject)
			require.True(t, ok)
			assert.Equal(t, int64(10), c, "saturated")
			assert.Empty(t, a.pending())
			assert.Empty(t, b.pending())
		})
	}
	t.Run("outage too short to open the breaker", func(t *testing.T) {
		pol := pols[0]
		a := newFallbackInstance(t, proxy.Listen, keys, pols)
		subject := randomSubject(t)
		proxy.Stop()
		local := 0
		for range 3 {
			out := askDefault(a.fb, pol.ID(), subject)
			if ratelimit.Admitted(out) {
				require.Equal(t, ratelimit.LocalEmergency, out.(ratelimit.Evaluated).Decision.Source)
				local++
			}
		}
		require.NoError(t, proxy.Start())
		require.Equal(t, redisrate.BreakerClosed, a.p.BreakerState(), "below the threshold")
		require.Positive(t, local)
		// The very next request carries the charge (local admissions and
		// the other instance's share) ahead of its decision.
		out := askDefault(a.fb, pol.ID(), subject)
		require.Equal(t, ratelimit.KindEvaluated, out.Kind(), "%v", out)
		require.Equal(t, ratelimit.GlobalRedis, out.(ratelimit.Evaluated).Decision.Source)
		want := int64(local) + 5
		if ratelimit.Admitted(out) {
			want++
		}
		c, ok := consumed(t, admin, keys, pol, subject)
		require.True(t, ok)
		assert.Equal(t, want, c, "local %d + reserved share 5 + this decision", local)
		assert.Empty(t, a.pending())
		assert.Zero(t, a.p.BreakerTrips())
	})
}
