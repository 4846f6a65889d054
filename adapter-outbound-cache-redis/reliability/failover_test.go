package reliability_test

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redisrate"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
	"github.com/tech-log/tech-log-backend/shared-contract/keyspace"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// Loading window of the LOADING tests: loadingKeys filler keys, each
// delayed by loadingKeyDelayMicros on load (Redis's test-suite knob
// key-load-delay, a usleep per key), so a load lasts at least 1.6 s and, as
// usleep oversleeps on a busy machine, a few seconds at most. The server
// serves clients (with -LOADING) every loadingEventBytes of RDB, about
// every 50 keys (10 ms).
const (
	loadingKeys           = 8000
	loadingKeyDelayMicros = 200
	loadingEventBytes     = 1024
)

// loadingServer starts a private server whose RDB loads slowly (see the
// constants above) and fills it with loadingKeys filler keys (DEBUG
// POPULATE, prefix "filler"), so that a load of its dataset lasts.
func loadingServer(t *testing.T) *redistest.Server {
	t.Helper()
	srv := redistest.Start(t,
		redistest.WithConfig("enable-debug-command", "yes"),
		redistest.WithConfig("key-load-delay", strconv.Itoa(loadingKeyDelayMicros)),
		redistest.WithConfig("loading-process-events-interval-bytes", strconv.Itoa(loadingEventBytes)),
	)
	srv.Require(t, redistest.CapRestart)
	require.NoError(t, srv.Client().Do(redistest.AdminCtx(t), "DEBUG", "POPULATE", loadingKeys, "filler", 16).Err())
	return srv
}

// loadingRefusal asserts that out is Unavailable{server_rejected} caused by
// a LOADING reply, and that the refused command was (written) or was not
// (the connection handshake) the program call.
func loadingRefusal(t *testing.T, out ratelimit.Outcome, written bool) bool {
	t.Helper()
	ok := assert.Equal(t, ratelimit.KindUnavailable, out.Kind(), "%v", out) &&
		assert.Equal(t, ratelimit.CategoryServerRejected, ratelimit.CategoryOf(out), "%v", out)
	if !ok {
		return false
	}
	var ce *redisrate.CallError
	if !assert.ErrorAs(t, out.(ratelimit.Unavailable).Cause, &ce) {
		return false
	}
	return assert.True(t, strings.HasPrefix(ce.Err.Error(), "LOADING "), ce.Err.Error()) &&
		assert.Equal(t, written, ce.Written, "%v", ce)
}

// isLoadingRefusal is loadingRefusal without asserting.
func isLoadingRefusal(out ratelimit.Outcome) bool {
	u, ok := out.(ratelimit.Unavailable)
	var ce *redisrate.CallError
	return ok && u.Category == ratelimit.CategoryServerRejected &&
		errors.As(u.Cause, &ce) && strings.HasPrefix(ce.Err.Error(), "LOADING ")
}

// TestLoadingServerRefusesBeforeRunning (fault-matrix row 11, LOADING): a
// server loading its RDB answers -LOADING to everything but a few commands
// (HELLO, INFO, ...). The provider's answer is Unavailable{server_rejected}
// for every algorithm, nothing of the program runs (evalsha and eval calls
// 0), no state changes, and the same provider serves again once the load
// is over.
//
//   - restart: the server is restarted on a big RDB. The provider's pooled
//     connection died with the old process, so each call dials: HELLO is
//     allowed while loading, but the handshake's PING probe is refused with
//     LOADING, so the call is refused before any byte of it is written
//     (CallError.Written false).
//   - reload: DEBUG RELOAD on a server whose provider holds a warm
//     connection: the EVALSHA itself is written and refused with LOADING
//     (Written true), counted by Redis as a rejected call.
func TestLoadingServerRefusesBeforeRunning(t *testing.T) {
	t.Run("restart", func(t *testing.T) {
		srv := loadingServer(t)
		admin := srv.Client()
		keys := randomKeys(t)
		pols := hourPolicies(t)
		p := newProvider(t, clientConfig(srv.Addr(), 2*time.Second, 2), keys, pols...)
		subject := randomSubject(t)
		require.True(t, ratelimit.Admitted(ask(p, pols[0].ID(), subject, 1)))
		require.NoError(t, admin.Save(redistest.AdminCtx(t)).Err())

		// Killed first, so that no call of the poller can run on the old
		// process (whose writes after SAVE the restart would drop).
		srv.Kill()
		type seen struct {
			out ratelimit.Outcome
			at  time.Time
		}
		results := make(chan []seen, 1)
		ctx, stop := context.WithCancel(context.Background())
		t.Cleanup(stop)
		go func() {
			// Wait until the new process accepts connections: asking
			// earlier only collects dial failures, and after PoolSize of
			// them go-redis fails every call fast with the last dial
			// error and redials once a second, which could hide most of
			// the loading window. Then ask round robin until every
			// policy has been refused with LOADING (well inside the
			// loading window), or an outcome that is neither a refusal
			// nor a connection failure shows up (the test then fails),
			// or stop.
			var got []seen
			defer func() { results <- got }()
			for !accepts(ctx, srv.Addr()) {
				select {
				case <-ctx.Done():
					return
				case <-time.After(5 * time.Millisecond):
				}
			}
			refused := map[ratelimit.PolicyID]bool{}
			for i := 0; len(refused) < len(pols); i++ {
				pol := pols[i%len(pols)]
				out := ask(p, pol.ID(), subject, 1)
				got = append(got, seen{out, time.Now()})
				if isLoadingRefusal(out) {
					refused[pol.ID()] = true
				} else if out.Kind() == ratelimit.KindEvaluated || out.Kind() == ratelimit.KindIncompatible {
					return
				}
				select {
				case <-ctx.Done():
					return
				case <-time.After(2 * time.Millisecond):
				}
			}
		}()
		start := time.Now()
		srv.Restart() // returns once PING answers PONG: the load is over
		loaded := time.Since(start)
		stop()
		got := <-results

		refusedBy := map[ratelimit.PolicyID]int{}
		var firstRefusal, lastRefusal time.Time
		kinds := map[string]int{}
		for _, s := range got {
			kinds[string(s.out.Kind())+"/"+string(ratelimit.CategoryOf(s.out))]++
			if isLoadingRefusal(s.out) {
				loadingRefusal(t, s.out, false)
				refusedBy[s.out.(ratelimit.Unavailable).PolicyID]++
				if firstRefusal.IsZero() {
					firstRefusal = s.at
				}
				lastRefusal = s.at
				continue
			}
			// Before the new process listens: a refused dial, or the
			// pooled connection of the dead process.
			switch s.out.Kind() {
			case ratelimit.KindUnavailable:
				assert.Equal(t, ratelimit.CategoryConnection, ratelimit.CategoryOf(s.out), "%v", s.out)
			case ratelimit.KindIndeterminate:
				assert.Equal(t, ratelimit.CategoryConnectionLost, ratelimit.CategoryOf(s.out), "%v", s.out)
				assert.True(t, firstRefusal.IsZero(), "only the dead process's connection can be lost: %v", s.out)
			default:
				t.Errorf("while restarting and loading: %v", s.out)
			}
		}
		for _, pol := range pols {
			assert.Positive(t, refusedBy[pol.ID()], "%s: refused with LOADING while loading", pol.ID())
		}
		require.NotEmpty(t, got, "the restarted server never accepted a connection")
		t.Logf("restart to loaded (PONG): %v; first call %v after the restart began, first LOADING refusal after %v; %d calls: %v; LOADING refusals per policy %v within %v",
			loaded.Round(time.Millisecond), got[0].at.Sub(start).Round(time.Millisecond), firstRefusal.Sub(start).Round(time.Millisecond),
			len(got), kinds, refusedBy, lastRefusal.Sub(firstRefusal).Round(time.Millisecond))

		stats := redistest.CommandStats(t, admin)
		assert.Zero(t, stats["evalsha"].Calls+stats["eval"].Calls, "no program call reached the loading server")
		t.Logf("after the load: hello calls %d, ping calls %d rejected %d (the handshake probes and redistest's PONG wait)",
			stats["hello"].Calls, stats["ping"].Calls, stats["ping"].RejectedCalls)
		requireRefusalsConsumedNothing(t, p, admin, keys, pols, subject)
	})

	t.Run("reload", func(t *testing.T) {
		srv := loadingServer(t)
		admin := srv.Client()
		keys := randomKeys(t)
		pols := hourPolicies(t)
		// Pool of 1: every call uses the connection Start left warm.
		p := newProvider(t, clientConfig(srv.Addr(), 2*time.Second, 1), keys, pols...)
		subject := randomSubject(t)
		require.True(t, ratelimit.Admitted(ask(p, pols[0].ID(), subject, 1)))
		resetStats(t, admin)

		// DEBUG RELOAD saves, empties and reloads the dataset; its own
		// connection blocks until the load is over, so it gets a client
		// with a read timeout longer than any load.
		opts := srv.Options()
		opts.MaxRetries = -1
		opts.ReadTimeout = 30 * time.Second
		reloader := redis.NewClient(opts)
		t.Cleanup(func() { _ = reloader.Close() })
		done := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			done <- reloader.Do(ctx, "DEBUG", "RELOAD").Err()
		}()
		start := time.Now()
		waitLoading(t, admin, done)
		loading := time.Since(start)

		for _, pol := range pols {
			loadingRefusal(t, ask(p, pol.ID(), subject, 1), true)
		}
		assert.Equal(t, "1", infoField(t, admin, "persistence", "loading"), "the calls were refused during the load")
		require.NoError(t, <-done, "DEBUG RELOAD")
		reloaded := time.Since(start)

		stats := redistest.CommandStats(t, admin)
		assert.Zero(t, stats["evalsha"].Calls, "refused, not run")
		assert.EqualValues(t, len(pols), stats["evalsha"].RejectedCalls, "each call reached the server once")
		assert.Zero(t, stats["eval"].Calls+stats["eval"].RejectedCalls, "no EVAL fallback")
		t.Logf("DEBUG RELOAD: loading:1 after %v, over after %v; evalsha calls %d, rejected_calls %d",
			loading.Round(time.Millisecond), reloaded.Round(time.Millisecond),
			stats["evalsha"].Calls, stats["evalsha"].RejectedCalls)
		requireRefusalsConsumedNothing(t, p, admin, keys, pols, subject)
	})
}

// requireRefusalsConsumedNothing checks the end state of a LOADING test:
// the one admitted call before the load (on pols[0]) is the only unit
// consumed, no other policy has state, and the same provider admits every
// policy again once the load is over.
func requireRefusalsConsumedNothing(t *testing.T, p *redisrate.Provider, admin *redis.Client, keys *keyspace.Builder, pols []ratelimit.Policy, subject ratelimit.SubjectDigest) {
	t.Helper()
	c, ok := consumed(t, admin, keys, pols[0], subject)
	require.True(t, ok, "the state written before the load is there")
	assert.Equal(t, int64(1), c, "the refused calls consumed nothing")
	for _, pol := range pols[1:] {
		_, ok := consumed(t, admin, keys, pol, subject)
		assert.False(t, ok, "%s: no state written", pol.ID())
	}
	for _, pol := range pols {
		assert.True(t, ratelimit.Admitted(ask(p, pol.ID(), subject, 1)), "%s: served again by the same provider", pol.ID())
	}
}

// accepts reports whether a TCP connection to addr can be opened.
func accepts(ctx context.Context, addr string) bool {
	d := net.Dialer{Timeout: 200 * time.Millisecond}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return false
	}
	_ = conn.Close()
	return true
}

// waitLoading polls INFO persistence until the server reports loading:1;
// it fails the test if done delivers first (the reload ended or failed) or
// after 10 s.
func waitLoading(t *testing.T, admin *redis.Client, done <-chan error) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for infoField(t, admin, "persistence", "loading") != "1" {
		select {
		case err := <-done:
			t.Fatalf("DEBUG RELOAD ended (%v) before loading was seen", err)
		default:
		}
		require.True(t, time.Now().Before(deadline), "the server never reported loading:1")
		time.Sleep(5 * time.Millisecond)
	}
}

// waitInfo polls INFO section on c until field reads want, failing the
// test after 10 s.
func waitInfo(t *testing.T, c *redis.Client, section, field, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := infoField(t, c, section, field)
		if got == want {
			return
		}
		require.True(t, time.Now().Before(deadline), "INFO %s %s is %q, want %q", section, field, got, want)
		time.Sleep(10 * time.Millisecond)
	}
}

// Figures of the failover tests: a limit of failoverLimit per subject in a
// window (or refill period) far longer than the test, failoverReplicated
// admits replicated before the fault, failoverUnreplicated admits
// acknowledged by the primary after its replica stopped receiving them.
const (
	failoverLimit        = 20
	failoverReplicated   = 5
	failoverUnreplicated = 7
)

func (r failoverRun) total() int { return r.onPrimary + r.onPromoted }
