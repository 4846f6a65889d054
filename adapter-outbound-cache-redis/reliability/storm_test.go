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

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// TestServerDownNoReconnectStorm (fault row 1): with the coordination
// server killed, 16 goroutines asking as fast as they can get
// Unavailable{connection} for every call, each well within the dial
// timeout, and the provider does not hammer the dead address: the dial
// attempts (counted by a wrapping Dialer) stay bounded by the pool size
// plus go-redis's one probe a second, however many calls were refused.
// Once the server is back the same provider admits again.
func TestServerDownNoReconnectStorm(t *testing.T) {
	srv := redistest.Start(t)
	srv.Require(t, redistest.CapKill, redistest.CapRestart)
	const pool, goroutines, perG = 16, 16, 100
	var dials atomic.Int64
	cfg := clientConfig(srv.Addr(), 2*time.Second, pool)
	cfg.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}
	keys := randomKeys(t)
	pols := hourPolicies(t)
	p := newProvider(t, cfg, keys, pols...)
	subject := randomSubject(t)
	require.True(t, ratelimit.Admitted(ask(p, pols[0].ID(), subject, 1)))

	srv.Kill()
	dials.Store(0)
	// burst sends goroutines x perG calls and returns their latencies
	// (sorted), the outcome counts and the time it took.
	burst := func() ([]time.Duration, map[string]int, time.Duration) {
		start := time.Now()
		var mu sync.Mutex
		var latencies []time.Duration
		kinds := map[string]int{}
		var wg sync.WaitGroup
		for range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range perG {
					t0 := time.Now()
					out := ask(p, pols[0].ID(), subject, 1)
					d := time.Since(t0)
					mu.Lock()
					latencies = append(latencies, d)
					kinds[string(out.Kind())+"/"+string(ratelimit.CategoryOf(out))]++
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
		return latencies, kinds, time.Since(start)
	}
	const calls = goroutines * perG
	for phase := 1; phase <= 2; phase++ {
		before := dials.Load()
		latencies, kinds, elapsed := burst()
		require.Len(t, latencies, calls)
		assert.Equal(t, map[string]int{"unavailable/connection": calls}, kinds, "phase %d: every call refused before sending", phase)
		worst := latencies[calls-1]
		assert.Less(t, worst, cfg.DialTimeout, "phase %d: no call waits out the dial timeout", phase)
		// Phase 1: go-redis stops dialing once PoolSize dials in a row
		// have failed; calls already past that check dial too (at most
		// one per goroutine). Phase 2: only the pool's probe, about one a
		// second, whatever the call rate.
		bound := int64(elapsed/time.Second) + 2
		if phase == 1 {
			bound += pool + goroutines
		}
		n := dials.Load() - before
		assert.LessOrEqual(t, n, bound, "phase %d: dials for %d refused calls over %v", phase, calls, elapsed)
		t.Logf("server down, phase %d: %d calls in %v, %d dials (bound %d), latency p50 %v p99 %v max %v",
			phase, calls, elapsed.Round(time.Millisecond), n, bound, latencies[calls/2], latencies[calls*99/100], worst)
	}

	srv.Restart()
	deadline := time.Now().Add(10 * time.Second)
	for !ratelimit.Admitted(ask(p, pols[0].ID(), randomSubject(t), 1)) {
		require.True(t, time.Now().Before(deadline), "the provider did not recover")
		time.Sleep(50 * time.Millisecond)
	}
}
