package redisrate

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest/rediscluster"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

func TestReplicationAcksOptions(t *testing.T) {
	f := &fakeCommander{}
	base := Options{CommandTimeout: testTimeout, MaxInFlight: 1}
	for _, tc := range []struct {
		acks    int
		timeout time.Duration
		want    string
	}{
		{-1, 0, "ReplicationAcks -1"},
		{MaxReplicationAcks + 1, time.Millisecond, "ReplicationAcks 17"},
		{1, 0, "ReplicationAckTimeout 0s"},
		{1, testTimeout, "ReplicationAckTimeout"},
		{0, time.Millisecond, "ReplicationAcks is 0"},
	} {
		o := base
		o.ReplicationAcks, o.ReplicationAckTimeout = tc.acks, tc.timeout
		_, err := newProvider(f, testKeys(t), testPolicies(t), o)
		require.ErrorIs(t, err, ErrInvalidConfig)
		assert.Contains(t, err.Error(), tc.want)
	}
}

// replicatedPair starts a primary and a syncing replica (process lane).
func replicatedPair(t *testing.T) (primary, replica *redistest.Server) {
	t.Helper()
	primary = redistest.Start(t, redistest.WithConfig("repl-diskless-sync-delay", "0"))
	primary.Require(t, redistest.CapReplicate, redistest.CapPause)
	replica = redistest.Start(t)
	ctx := redistest.AdminCtx(t)
	host, port, _ := net.SplitHostPort(primary.Addr())
	require.NoError(t, replica.Client().Do(ctx, "replicaof", host, port).Err())
	requireLinkUp(t, replica)
	return primary, replica
}

// requireLinkUp waits (bounded) until replica's INFO replication, read
// with redisinfo, says its link to its primary is up.
func requireLinkUp(t *testing.T, replica *redistest.Server) {
	t.Helper()
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		repl, err := rediscluster.Replication(ctx, replica.Client())
		return err == nil && repl.LinkUp
	}, 15*time.Second, 20*time.Millisecond, "replica %s: link to its primary not up", replica.Addr())
}

// TestReplicationAcksShortfall (fault row 22): with ReplicationAcks 1, WAIT
// goes in the same pipeline as the program. A frozen replica acknowledges
// nothing: an ALLOWED reply becomes Indeterminate{replication} and its
// consumption stays counted; a DENIED reply stands. With the replica
// running, admissions are Evaluated (a slow acknowledgement on a loaded
// machine may still make one Indeterminate{replication}: counted, never
// admitted). Every program call is followed by exactly one WAIT, and the
// first denial comes after exactly limit program runs.
func TestReplicationAcksShortfall(t *testing.T) {
	primary, replica := replicatedPair(t)
	keys := randomKeys(t)
	const limit = 20
	pol := fixedPolicy(t, "acks", limit, time.Hour)
	cfg := serviceConfig(primary)
	// The exact run count below needs every call decided by its reply, so
	// the command timeout leaves a loaded machine ample room beyond the
	// WAIT's own timeout: a shortfall is then Indeterminate{replication},
	// never a command timeout of unknown effect.
	cfg.CommandTimeout, cfg.PoolTimeout = 3*time.Second, time.Second
	const ackTimeout = 200 * time.Millisecond
	client, err := NewClient(cfg)
	require.NoError(t, err)
	p, err := New(client, keys, []ratelimit.Policy{pol}, Options{
		CommandTimeout: cfg.CommandTimeout, MaxInFlight: cfg.PoolSize,
		ReplicationAcks: 1, ReplicationAckTimeout: ackTimeout,
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, p.Start(ctx))
	s := randomSubject(t)

	runs, admitted, shortfalls := 0, 0, 0
	evaluate := func() ratelimit.Outcome {
		t.Helper()
		out := ask(p, pol.ID(), s, 1)
		switch o := out.(type) {
		case ratelimit.Evaluated:
			if o.Decision.Allowed {
				runs++
				admitted++
			}
		case ratelimit.Indeterminate:
			require.Equal(t, ratelimit.CategoryReplication, o.Category, "%v", out)
			require.True(t, errors.Is(o.Cause, ErrReplicationShortfall))
			runs++
			shortfalls++
		default:
			t.Fatalf("outcome %v", out)
		}
		return out
	}
	for range 50 { // a healthy replica acknowledges (bounded tries)
		if ratelimit.Admitted(evaluate()) {
			break
		}
	}
	require.Equal(t, 1, admitted, "an acknowledged admission")

	replica.Pause(5 * time.Second)
	for range 2 {
		out := evaluate()
		assert.Equal(t, ratelimit.CategoryReplication, ratelimit.CategoryOf(out), "a frozen replica acknowledges nothing")
	}
	replica.Resume()
	requireLinkUp(t, replica)

	denied := false
	for range limit + 1 {
		out := evaluate()
		if e, ok := out.(ratelimit.Evaluated); ok && !e.Decision.Allowed {
			denied = true
			break
		}
	}
	require.True(t, denied, "a denial needs no acknowledgement")
	assert.Equal(t, limit, runs, "the unacknowledged admissions stayed counted: the first denial follows exactly limit runs")
	calls := commandCalls(t, primary.Client(), "evalsha")
	assert.Equal(t, runs+1, calls)
	assert.Equal(t, calls, commandCalls(t, primary.Client(), "wait"), "one WAIT per program call")
	t.Logf("replication acks: %d admitted, %d Indeterminate{replication} (2 with the replica frozen)", admitted, shortfalls)
	assert.LessOrEqual(t, 2, shortfalls)
}
