package redisrate

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/programs"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// TestServiceScriptFlushFallsBackToOneEval: after SCRIPT FLUSH the next
// evaluation costs exactly one EVAL, decides correctly, and re-caches the
// script for the one after.
func TestServiceScriptFlushFallsBackToOneEval(t *testing.T) {
	srv := redistest.Start(t)
	ownServer(t, srv)
	admin := srv.Client()
	p := serviceProvider(t, srv, randomKeys(t), conformancePolicies(t, 1), nil)
	subject := randomSubject(t)
	require.True(t, ratelimit.Admitted(ask(p, "c-bucket", subject, 2)))

	require.NoError(t, admin.ConfigResetStat(redistest.AdminCtx(t)).Err())
	require.NoError(t, admin.ScriptFlush(redistest.AdminCtx(t)).Err())
	out := ask(p, "c-bucket", subject, 1)
	e, ok := out.(ratelimit.Evaluated)
	require.True(t, ok, "%v", out)
	assert.True(t, e.Decision.Allowed)
	assert.Equal(t, int64(2), e.Decision.Remaining, "state survived, one unit taken once")
	assert.Equal(t, 1, commandCalls(t, admin, "evalsha"), "one EVALSHA answered NOSCRIPT")
	assert.Equal(t, 1, commandCalls(t, admin, "eval"), "exactly one EVAL")

	out = ask(p, "c-bucket", subject, 1)
	require.True(t, ratelimit.Admitted(out), "%v", out)
	assert.Equal(t, int64(1), out.(ratelimit.Evaluated).Decision.Remaining)
	assert.Equal(t, 2, commandCalls(t, admin, "evalsha"))
	assert.Equal(t, 1, commandCalls(t, admin, "eval"), "EVAL cached the script")
}

// TestServiceKillAndRestart: with the server gone, evaluations are
// Unavailable{connection} without waiting out the dial timeout; after a
// restart (empty, no scripts) the same provider recovers by itself and
// falls back to EVAL once.
func TestServiceKillAndRestart(t *testing.T) {
	srv := redistest.Start(t)
	srv.Require(t, redistest.CapKill, redistest.CapRestart)
	t.Cleanup(func() { waitGoroutineGone(t, poolDialProber) }) // after p.Close
	slow := func(c *ClientConfig) {
		c.CommandTimeout, c.DialTimeout = 2*time.Second, 2*time.Second
	}
	p := serviceProvider(t, srv, randomKeys(t), conformancePolicies(t, 1), slow)
	subject := randomSubject(t)
	require.True(t, ratelimit.Admitted(ask(p, "c-fixed", subject, 1)))

	srv.Kill()
	time.Sleep(50 * time.Millisecond) // let the kernel deliver the peer close to idle connections
	for i := 0; i < 5; i++ {
		start := time.Now()
		out := ask(p, "c-fixed", subject, 1)
		assert.Equal(t, ratelimit.KindUnavailable, out.Kind(), "%v", out)
		assert.Equal(t, ratelimit.CategoryConnection, ratelimit.CategoryOf(out), "%v", out)
		assert.Less(t, time.Since(start), 2*time.Second, "a refused dial is not waited out")
	}

	srv.Restart()
	var out ratelimit.Outcome
	require.Eventually(t, func() bool {
		out = ask(p, "c-fixed", subject, 1)
		return out.Kind() == ratelimit.KindEvaluated
	}, 10*time.Second, 50*time.Millisecond, "the provider recovers without a rebuild")
	assert.True(t, ratelimit.Admitted(out))
	assert.Equal(t, int64(4), out.(ratelimit.Evaluated).Decision.Remaining, "the restarted server is empty")
	assert.Equal(t, 1, commandCalls(t, srv.Client(), "eval"), "the empty script cache cost one EVAL")
}

// TestServiceReadTimeoutIsIndeterminateAndTheCallRan: a frozen server
// answers nothing within the command timeout. On a warm connection the call
// was written: Indeterminate, and once the server thaws the program has
// run. On a fresh connection the freeze hits the handshake: Unavailable,
// and the key was never touched.
func TestServiceReadTimeoutIsIndeterminateAndTheCallRan(t *testing.T) {
	srv := redistest.Start(t)
	srv.Require(t, redistest.CapPause)
	keys := randomKeys(t)
	short := func(c *ClientConfig) {
		c.CommandTimeout, c.DialTimeout, c.PoolTimeout = 300*time.Millisecond, 300*time.Millisecond, 100*time.Millisecond
	}
	pol := conformancePolicies(t, 1)[0]
	admin := srv.Client()

	t.Run("warm connection", func(t *testing.T) {
		p := serviceProvider(t, srv, keys, conformancePolicies(t, 1), short) // Start warmed a connection
		subject := randomSubject(t)
		key, err := StateKey(keys, pol, subject)
		require.NoError(t, err)
		srv.Pause(2 * time.Second)
		out := ask(p, pol.ID(), subject, 2)
		srv.Resume()
		assert.Equal(t, ratelimit.KindIndeterminate, out.Kind(), "%v", out)
		assert.Equal(t, ratelimit.CategoryTimeout, ratelimit.CategoryOf(out), "%v", out)
		assert.False(t, ratelimit.Admitted(out))
		require.Eventually(t, func() bool {
			v, err := admin.Get(redistest.AdminCtx(t), key).Bytes()
			if err != nil {
				return false
			}
			f, err := programs.State(v).Decode()
			return err == nil && f[programs.FieldCount] == 2
		}, 5*time.Second, 20*time.Millisecond, "the timed-out call ran once the server thawed")
		out = ask(p, pol.ID(), subject, 1)
		require.True(t, ratelimit.Admitted(out), "%v", out)
		assert.Equal(t, int64(2), out.(ratelimit.Evaluated).Decision.Remaining, "ran exactly once, never retried")
	})
	t.Run("fresh connection", func(t *testing.T) {
		cfg := serviceConfig(srv)
		short(&cfg)
		client, err := NewClient(cfg)
		require.NoError(t, err)
		p, err := New(client, keys, conformancePolicies(t, 1), Options{CommandTimeout: cfg.CommandTimeout, MaxInFlight: cfg.PoolSize})
		require.NoError(t, err)
		t.Cleanup(func() { _ = p.Close() })
		subject := randomSubject(t)
		key, err := StateKey(keys, pol, subject)
		require.NoError(t, err)
		srv.Pause(2 * time.Second)
		out := ask(p, pol.ID(), subject, 2)
		srv.Resume()
		assert.Equal(t, ratelimit.KindUnavailable, out.Kind(), "%v", out)
		assert.Equal(t, ratelimit.CategoryConnection, ratelimit.CategoryOf(out), "%v", out)
		time.Sleep(100 * time.Millisecond) // give the thawed server time to run anything queued
		n, err := admin.Exists(redistest.AdminCtx(t), key).Result()
		require.NoError(t, err)
		assert.Zero(t, n, "nothing of the call reached the server")
	})
}
