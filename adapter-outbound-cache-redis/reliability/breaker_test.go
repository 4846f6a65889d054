package reliability_test

import (
	"context"
	"net"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redisrate"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// breakerThreshold is the fault lane's breaker threshold.
const breakerThreshold = 3

// countingDialer is a ClientConfig.Dialer that counts dial attempts: every
// connection the client opens goes through it.
type countingDialer struct{ n atomic.Int64 }

func (d *countingDialer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	d.n.Add(1)
	var nd net.Dialer
	return nd.DialContext(ctx, network, addr)
}

// breakerProvider builds and starts a Provider with a breaker on addr,
// dialing through d.
func breakerProvider(t testing.TB, addr string, d *countingDialer, interval time.Duration, pols []ratelimit.Policy) *redisrate.Provider {
	t.Helper()
	cfg := clientConfig(addr, faultTimeout, 8) // pool > threshold: go-redis's own dial backoff stays out of the way
	cfg.Dialer = d.dial
	client, err := redisrate.NewClient(cfg)
	require.NoError(t, err)
	p, err := redisrate.New(client, randomKeys(t), pols, redisrate.Options{
		CommandTimeout: faultTimeout, MaxInFlight: 8,
		Breaker: redisrate.BreakerOptions{Threshold: breakerThreshold, ProbeInterval: interval},
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	require.NoError(t, p.Start(redistest.AdminCtx(t)))
	return p
}

// tripBreaker calls p until its breaker opens (bounded) and returns the
// number of calls that were sent (not answered circuit_open) and their
// latencies.
func tripBreaker(t testing.TB, p *redisrate.Provider, id ratelimit.PolicyID) (sent int, latencies []time.Duration) {
	t.Helper()
	for i := 0; p.BreakerState() == redisrate.BreakerClosed; i++ {
		require.Less(t, i, 4*breakerThreshold, "breaker did not open")
		t0 := time.Now()
		out := ask(p, id, randomSubject(t), 1)
		latencies = append(latencies, time.Since(t0))
		require.False(t, ratelimit.Admitted(out), "%v", out)
		require.NotEqual(t, ratelimit.CategoryCircuitOpen, ratelimit.CategoryOf(out))
		sent++
	}
	return sent, latencies
}

// openBurst sends goroutines x perG calls at p and returns their sorted
// latencies and outcome counts.
func openBurst(t testing.TB, p *redisrate.Provider, id ratelimit.PolicyID, goroutines, perG int) ([]time.Duration, map[string]int) {
	var mu sync.Mutex
	var latencies []time.Duration
	kinds := map[string]int{}
	subject := randomSubject(t)
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			local := make([]time.Duration, 0, perG)
			localKinds := map[string]int{}
			for range perG {
				t0 := time.Now()
				out := ask(p, id, subject, 1)
				local = append(local, time.Since(t0))
				localKinds[string(out.Kind())+"/"+string(ratelimit.CategoryOf(out))]++
			}
			mu.Lock()
			defer mu.Unlock()
			latencies = append(latencies, local...)
			for k, v := range localKinds {
				kinds[k] += v
			}
		})
	}
	wg.Wait()
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	return latencies, kinds
}

func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(float64(len(sorted))*q))]
}

// TestBreakerOpensOnUnreachableRedis (fault lane; degraded-mode row 1):
// Redis made unreachable in each way the lane can: refused (killed:
// connect refused), accepted-then-silent (SIGSTOPped: the kernel accepts,
// nothing answers) and blackholed (a toxiproxy timeout toxic drops every
// byte both ways on old and new connections). In each case:
//   - after breakerThreshold calls that fail with a connection failure or
//     a timeout, the breaker opens;
//   - every call while open is Unavailable{circuit_open}, no call dials
//     (the counting Dialer sees nothing) and no program call reaches the
//     server (INFO commandstats, read once the server answers again);
//   - after Redis returns, a breaker with a short probe interval closes
//     within a generous bound and the provider admits again.
//
// The decision time while open, and before it, is logged, not asserted:
// docs/reliability.md records the measurements.
func TestBreakerOpensOnUnreachableRedis(t *testing.T) {
	const probeInterval = 200 * time.Millisecond
	modes := []struct {
		name  string
		fault func(t *testing.T, srv *redistest.Server) (lift func())
	}{
		{"refused", func(t *testing.T, srv *redistest.Server) func() {
			srv.Require(t, redistest.CapKill, redistest.CapRestart)
			srv.Kill()
			return srv.Restart
		}},
		{"accepted-then-silent", func(t *testing.T, srv *redistest.Server) func() {
			srv.Require(t, redistest.CapPause)
			srv.Pause(time.Minute)
			return srv.Resume
		}},
		{"blackholed", nil}, // through the proxy, below
	}
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			srv := redistest.Start(t)
			ownServer(t, srv)
			admin := srv.Client()
			addr := srv.Addr()
			fault := mode.fault
			if fault == nil {
				proxy := startProxy(t, srv.Addr())
				addr = proxy.Listen
				fault = func(t *testing.T, _ *redistest.Server) func() {
					up := addToxic(t, proxy, `{"name":"bh-up","type":"timeout","stream":"upstream","attributes":{"timeout":0}}`)
					down := addToxic(t, proxy, `{"name":"bh-down","type":"timeout","stream":"downstream","attributes":{"timeout":0}}`)
					return func() { up(); down() }
				}
			}
			pols := hourPolicies(t)
			id := pols[0].ID()
			// measured: probes only after a minute, so nothing but the
			// calls under test could dial. recovering: probes every
			// probeInterval, to time the close.
			var dMeasured, dRecovering countingDialer
			measured := breakerProvider(t, addr, &dMeasured, time.Minute, pols)
			recovering := breakerProvider(t, addr, &dRecovering, probeInterval, pols)
			for _, p := range []*redisrate.Provider{measured, recovering} {
				require.True(t, ratelimit.Admitted(ask(p, id, randomSubject(t), 1)), "warm connection")
			}
			resetStats(t, admin)

			lift := fault(t, srv)
			lifted := false
			t.Cleanup(func() {
				if !lifted {
					lift()
				}
			})
			sent, before := tripBreaker(t, measured, id)
			sentRecovering, _ := tripBreaker(t, recovering, id)
			require.Equal(t, redisrate.BreakerOpen, measured.BreakerState())

			dials := dMeasured.n.Load()
			const goroutines, perG = 8, 250
			latencies, kinds := openBurst(t, measured, id, goroutines, perG)
			assert.Equal(t, map[string]int{"unavailable/circuit_open": goroutines * perG}, kinds)
			assert.Equal(t, dials, dMeasured.n.Load(), "no dial while open")

			lift()
			lifted = true
			liftedAt := time.Now()
			deadline := liftedAt.Add(15 * time.Second)
			for recovering.BreakerState() != redisrate.BreakerClosed {
				require.True(t, time.Now().Before(deadline), "breaker did not close after redis returned")
				time.Sleep(5 * time.Millisecond)
			}
			closedAfter := time.Since(liftedAt)
			assert.Equal(t, uint64(1), recovering.BreakerTrips())
			require.True(t, ratelimit.Admitted(ask(recovering, id, randomSubject(t), 1)), "admits once closed")

			// Every program call the server ever ran since the reset came
			// from the calls sent before the breaker opened (a paused server
			// runs what was queued before the trip when it resumes).
			ran := calls(t, admin, "evalsha") + calls(t, admin, "eval")
			assert.LessOrEqual(t, ran, sent+sentRecovering+1, "nothing sent while open")
			assert.Equal(t, redisrate.BreakerOpen, measured.BreakerState(), "the minute-interval breaker has not probed yet")
			assert.Equal(t, dials, dMeasured.n.Load(), "still no dial")

			sort.Slice(before, func(i, j int) bool { return before[i] < before[j] })
			t.Logf("%s: breaker opened after %d calls (latency p50 %v max %v); open: %d calls, p50 %v p99 %v max %v, 0 dials; closed %v after redis returned (probe interval %v)",
				mode.name, sent, quantile(before, 0.5), before[len(before)-1],
				len(latencies), quantile(latencies, 0.5), quantile(latencies, 0.99), latencies[len(latencies)-1],
				closedAfter.Round(time.Millisecond), probeInterval)
		})
	}
}
