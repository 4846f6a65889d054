package redisrate

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// TestServiceOOMIsRefusedBeforeTheProgramRuns: with maxmemory exhausted the
// `#!lua` program is refused up front: Unavailable{server_rejected}, the
// state unchanged, the call counted as rejected.
func TestServiceOOMIsRefusedBeforeTheProgramRuns(t *testing.T) {
	srv := redistest.Start(t, redistest.WithConfig("maxmemory-policy", "noeviction"))
	ownServer(t, srv)
	keys := randomKeys(t)
	admin := srv.Client()
	p := serviceProvider(t, srv, keys, conformancePolicies(t, 1), nil)
	subject := randomSubject(t)
	pol := conformancePolicies(t, 1)[2]
	key, err := StateKey(keys, pol, subject)
	require.NoError(t, err)
	require.True(t, ratelimit.Admitted(ask(p, pol.ID(), subject, 1)))
	before := storedState(t, admin, key)
	ttlBefore, err := admin.PTTL(redistest.AdminCtx(t), key).Result()
	require.NoError(t, err)

	require.NoError(t, admin.ConfigResetStat(redistest.AdminCtx(t)).Err())
	require.NoError(t, admin.ConfigSet(redistest.AdminCtx(t), "maxmemory", "1").Err())
	t.Cleanup(func() { _ = admin.ConfigSet(context.Background(), "maxmemory", "0").Err() })
	out := ask(p, pol.ID(), subject, 1)
	assert.Equal(t, ratelimit.KindUnavailable, out.Kind(), "%v", out)
	assert.Equal(t, ratelimit.CategoryServerRejected, ratelimit.CategoryOf(out), "%v", out)
	var ce *CallError
	require.ErrorAs(t, causeOf(out), &ce)
	assert.True(t, ce.Written)
	assert.True(t, strings.HasPrefix(ce.Err.Error(), "OOM "), ce.Err.Error())
	assert.NotContains(t, ce.Err.Error(), "script:", "refused before the script ran")

	after := storedState(t, admin, key)
	ttlAfter, err := admin.PTTL(redistest.AdminCtx(t), key).Result()
	require.NoError(t, err)
	assert.Equal(t, before, after)
	assert.LessOrEqual(t, ttlAfter, ttlBefore)
	evalsha := redistest.CommandStats(t, admin)["evalsha"]
	assert.EqualValues(t, 1, evalsha.RejectedCalls)
	assert.Zero(t, evalsha.Calls, "never executed")

	require.NoError(t, admin.ConfigSet(redistest.AdminCtx(t), "maxmemory", "0").Err())
	out = ask(p, pol.ID(), subject, 1)
	require.True(t, ratelimit.Admitted(out), "%v", out)
	assert.Equal(t, int64(3), out.(ratelimit.Evaluated).Decision.Remaining)
}

// TestServiceReplicaRefusesWrites: a server turned replica refuses the
// program before it runs: Unavailable{server_rejected}.
func TestServiceReplicaRefusesWrites(t *testing.T) {
	primary := redistest.Start(t)
	replica := redistest.Start(t)
	ownServer(t, primary)
	ownServer(t, replica)
	p := serviceProvider(t, replica, randomKeys(t), conformancePolicies(t, 1), nil)
	host, port, _ := strings.Cut(primary.Addr(), ":")
	admin := replica.Client()
	require.NoError(t, admin.ReplicaOf(redistest.AdminCtx(t), host, port).Err())
	t.Cleanup(func() { _ = admin.ReplicaOf(context.Background(), "NO", "ONE").Err() })
	for i := 0; i < 3; i++ {
		out := ask(p, "c-sliding", randomSubject(t), 1)
		assert.Equal(t, ratelimit.KindUnavailable, out.Kind(), "%v", out)
		assert.Equal(t, ratelimit.CategoryServerRejected, ratelimit.CategoryOf(out), "%v", out)
		var ce *CallError
		require.ErrorAs(t, causeOf(out), &ce)
		assert.True(t, strings.HasPrefix(ce.Err.Error(), "READONLY "), ce.Err.Error())
	}
	n, err := admin.DBSize(redistest.AdminCtx(t)).Result()
	require.NoError(t, err)
	assert.Zero(t, n)
}

// TestServiceBusyServerRefuses: while another client's script holds the
// server past busy-reply-threshold, the program is refused with BUSY:
// Unavailable{server_rejected}, nothing written; after SCRIPT KILL the
// provider works again.
func TestServiceBusyServerRefuses(t *testing.T) {
	srv := redistest.Start(t, redistest.WithConfig("busy-reply-threshold", "50"))
	ownServer(t, srv)
	keys := randomKeys(t)
	p := serviceProvider(t, srv, keys, conformancePolicies(t, 1), nil)
	hog := redis.NewClient(&redis.Options{Addr: srv.Addr(), Protocol: 2, MaxRetries: -1, ReadTimeout: 20 * time.Second, DisableIdentity: true})
	t.Cleanup(func() { _ = hog.Close() })
	require.NoError(t, hog.Ping(redistest.AdminCtx(t)).Err())
	hogDone := make(chan error, 1)
	go func() { hogDone <- hog.Eval(context.Background(), "while true do end", nil).Err() }()
	admin := srv.Client()
	require.Eventually(t, func() bool {
		err := admin.Ping(redistest.AdminCtx(t)).Err()
		return err != nil && strings.HasPrefix(err.Error(), "BUSY ")
	}, 10*time.Second, 20*time.Millisecond, "the hog script holds the server")

	subject := randomSubject(t)
	out := ask(p, "c-fixed", subject, 1)
	assert.Equal(t, ratelimit.KindUnavailable, out.Kind(), "%v", out)
	assert.Equal(t, ratelimit.CategoryServerRejected, ratelimit.CategoryOf(out), "%v", out)

	require.NoError(t, admin.ScriptKill(redistest.AdminCtx(t)).Err())
	select {
	case err := <-hogDone:
		require.Error(t, err, "the hog was killed")
	case <-time.After(10 * time.Second):
		t.Fatal("hog script not killed")
	}
	out = ask(p, "c-fixed", subject, 1)
	require.True(t, ratelimit.Admitted(out), "%v", out)
	assert.Equal(t, int64(4), out.(ratelimit.Evaluated).Decision.Remaining, "the refused call consumed nothing")
}

// TestServiceAuthAndACLRefusals: NOAUTH, WRONGPASS and NOPERM are refusals
// before the program runs.
func TestServiceAuthAndACLRefusals(t *testing.T) {
	srv := redistest.Start(t)
	ownServer(t, srv)
	admin := srv.Client()
	require.NoError(t, admin.Do(redistest.AdminCtx(t), "ACL", "SETUSER", "limiter", "on", ">limiter-pass", "~*", "+@all", "-evalsha", "-eval").Err())
	require.NoError(t, admin.Do(redistest.AdminCtx(t), "ACL", "SETUSER", "ok-user", "on", ">ok-pass", "~*", "+@all").Err())
	require.NoError(t, admin.ConfigSet(redistest.AdminCtx(t), "requirepass", "default-pass").Err())
	t.Cleanup(func() { _ = admin.ConfigSet(context.Background(), "requirepass", "").Err() })
	tests := []struct {
		name     string
		user, pw string
		prefix   string
	}{
		{"no password", "", "", "NOAUTH"},
		{"wrong password", "", "nope", "WRONGPASS"},
		{"user without the script commands", "limiter", "limiter-pass", "NOPERM"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := serviceConfig(srv)
			cfg.Username, cfg.Password = tt.user, tt.pw
			client, err := NewClient(cfg)
			require.NoError(t, err)
			p, err := New(client, randomKeys(t), conformancePolicies(t, 1), Options{CommandTimeout: cfg.CommandTimeout, MaxInFlight: cfg.PoolSize})
			require.NoError(t, err)
			t.Cleanup(func() { _ = p.Close() })
			out := ask(p, "c-fixed", randomSubject(t), 1)
			assert.Equal(t, ratelimit.KindUnavailable, out.Kind(), "%v", out)
			assert.Equal(t, ratelimit.CategoryServerRejected, ratelimit.CategoryOf(out), "%v", out)
			var ce *CallError
			require.ErrorAs(t, causeOf(out), &ce)
			assert.True(t, strings.HasPrefix(ce.Err.Error(), tt.prefix+" "), ce.Err.Error())
			if tt.pw != "" {
				assert.NotContains(t, fmt.Sprint(out, ce), tt.pw, "no password in the outcome or its cause")
			}
		})
	}
	t.Run("right credentials", func(t *testing.T) {
		p := serviceProvider(t, srv, randomKeys(t), conformancePolicies(t, 1), func(c *ClientConfig) { c.Username, c.Password = "ok-user", "ok-pass" })
		assert.True(t, ratelimit.Admitted(ask(p, "c-fixed", randomSubject(t), 1)))
	})
}

// TestServiceMaxClientsIsUnavailable: a server at maxclients greets a new
// connection with an error and closes it; the handshake probe turns that
// into Unavailable before anything of the call is written.
func TestServiceMaxClientsIsUnavailable(t *testing.T) {
	srv := redistest.Start(t)
	ownServer(t, srv)
	admin := srv.Client()
	require.NoError(t, admin.Ping(redistest.AdminCtx(t)).Err())
	require.NoError(t, admin.ConfigSet(redistest.AdminCtx(t), "maxclients", "1").Err()) // the admin connection is the one
	t.Cleanup(func() { _ = admin.ConfigSet(context.Background(), "maxclients", "10000").Err() })
	cfg := serviceConfig(srv)
	client, err := NewClient(cfg)
	require.NoError(t, err)
	p, err := New(client, randomKeys(t), conformancePolicies(t, 1), Options{CommandTimeout: cfg.CommandTimeout, MaxInFlight: cfg.PoolSize})
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	out := ask(p, "c-fixed", randomSubject(t), 1)
	assert.Equal(t, ratelimit.KindUnavailable, out.Kind(), "%v", out)
	// go-redis swallows the greeting as a failed HELLO; the probe then
	// finds the connection closed.
	assert.Equal(t, ratelimit.CategoryConnection, ratelimit.CategoryOf(out), "%v", out)
	var ce *CallError
	require.ErrorAs(t, causeOf(out), &ce)
	assert.False(t, ce.Written)
	t.Logf("maxclients outcome: %v cause %v", out, ce.Err)
}

// TestServiceForeignStateIsIncompatible: a key of another type is answered
// Incompatible{state_incompatible} and left as it was.
func TestServiceForeignStateIsIncompatible(t *testing.T) {
	srv := redistest.Start(t)
	keys := randomKeys(t)
	p := serviceProvider(t, srv, keys, conformancePolicies(t, 1), nil)
	pol := conformancePolicies(t, 1)[0]
	subject := randomSubject(t)
	key, err := StateKey(keys, pol, subject)
	require.NoError(t, err)
	require.NoError(t, srv.Client().Set(redistest.AdminCtx(t), key, "garbage", time.Minute).Err())
	out := ask(p, pol.ID(), subject, 1)
	assert.Equal(t, ratelimit.KindIncompatible, out.Kind(), "%v", out)
	assert.Equal(t, ratelimit.CategoryStateIncompatible, ratelimit.CategoryOf(out))
	v, err := srv.Client().Get(redistest.AdminCtx(t), key).Result()
	require.NoError(t, err)
	assert.Equal(t, "garbage", v)
}

// TestServiceRESP3 runs the provider with RESP3 against the real server.
func TestServiceRESP3(t *testing.T) {
	srv := redistest.Start(t)
	p := serviceProvider(t, srv, randomKeys(t), conformancePolicies(t, 1), func(c *ClientConfig) { c.Protocol = ProtocolRESP3 })
	subject := randomSubject(t)
	for _, pol := range conformancePolicies(t, 1) {
		runSteps(t, p, pol, subject, []step{{3, true, 2}, {3, false, 2}, {2, true, 0}})
	}
}
