package reliability_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// failoverPolicies are one policy of each algorithm with a limit of
// failoverLimit whose state does not reset or refill during a test.
func failoverPolicies(t *testing.T) []ratelimit.Policy {
	const week = 7 * 24 * time.Hour
	return []ratelimit.Policy{
		mustPolicy(t, "f-fixed", ratelimit.FixedWindow{Limit: failoverLimit, Window: week}, 1),
		mustPolicy(t, "f-sliding", ratelimit.SlidingWindowCounter{Limit: failoverLimit, Window: week}, 1),
		mustPolicy(t, "f-bucket", ratelimit.TokenBucket{Capacity: failoverLimit, RefillTokens: 1, RefillPeriod: week}, 1),
	}
}

// failoverRun is what one failover measured.
type failoverRun struct {
	onPrimary  int   // admits acknowledged by the old primary
	replicated int64 // units the promoted replica had consumed
	onPromoted int   // admits of the promoted replica until the first denial
}

// failover runs the fault-matrix row 13 sequence for pol: P and R private
// servers, R a synced replica of P; provider A on P admits
// failoverReplicated requests, confirmed on R (WAIT and R's copy); R is
// frozen (SIGSTOP); if cut, P drops the replication link (CLIENT KILL TYPE
// replica: the replica is partitioned away); A admits failoverUnreplicated
// more; P is killed (SIGKILL); R is thawed and, once it has seen its
// primary go, promoted (REPLICAOF NO ONE); provider B on R asks until
// denied. Every decision must be Evaluated.
func failover(t *testing.T, pol ratelimit.Policy, cut bool) failoverRun {
	t.Helper()
	primary := redistest.Start(t, redistest.WithConfig("repl-diskless-sync-delay", "0"))
	// Both servers are of the same lane: checked once, before the second.
	primary.Require(t, redistest.CapReplicate, redistest.CapKill, redistest.CapPause)
	replica := redistest.Start(t)
	pc, rc := primary.Client(), replica.Client()

	host, port, err := net.SplitHostPort(primary.Addr())
	require.NoError(t, err)
	require.NoError(t, rc.Do(redistest.AdminCtx(t), "REPLICAOF", host, port).Err())
	t.Cleanup(func() { _ = rc.Do(context.Background(), "REPLICAOF", "NO", "ONE").Err() })
	waitInfo(t, rc, "replication", "master_link_status", "up")

	keys := randomKeys(t)
	subject := randomSubject(t)
	a := newProvider(t, clientConfig(primary.Addr(), 2*time.Second, 2), keys, pol)
	var run failoverRun
	admit := func(n int) {
		t.Helper()
		for range n {
			out := ask(a, pol.ID(), subject, 1)
			require.True(t, ratelimit.Admitted(out), "on the primary: %v", out)
			run.onPrimary++
		}
	}
	admit(failoverReplicated)
	// WAIT covers only the writes of its own connection (a connection
	// that wrote nothing returns at once), so the admin connection writes
	// a marker after the admits: the stream is ordered, and the
	// replica's acknowledgement of the marker covers the admits too.
	require.NoError(t, pc.Incr(redistest.AdminCtx(t), "failover-marker").Err())
	acked, err := pc.Do(redistest.AdminCtx(t), "WAIT", 1, 5000).Int()
	require.NoError(t, err)
	require.Equal(t, 1, acked, "the replica acknowledged the first admits")
	c, ok := consumed(t, rc, keys, pol, subject)
	require.True(t, ok)
	require.Equal(t, int64(failoverReplicated), c, "the replica's copy")

	replica.Pause(time.Minute) // resumed below
	if cut {
		killed, err := pc.Do(redistest.AdminCtx(t), "CLIENT", "KILL", "TYPE", "replica").Int()
		require.NoError(t, err)
		require.Equal(t, 1, killed, "the replication link")
		waitInfo(t, pc, "replication", "connected_slaves", "0")
	}
	admit(failoverUnreplicated)
	c, ok = consumed(t, pc, keys, pol, subject)
	require.True(t, ok)
	require.Equal(t, int64(failoverReplicated+failoverUnreplicated), c, "the primary's state before it dies")

	primary.Kill()
	replica.Resume()
	// Promote only once the replica has read its link to the end: what
	// reached it before the primary died is applied, nothing else.
	waitInfo(t, rc, "replication", "master_link_status", "down")
	require.NoError(t, rc.Do(redistest.AdminCtx(t), "REPLICAOF", "NO", "ONE").Err())
	require.Equal(t, "master", infoField(t, rc, "replication", "role"))
	run.replicated, ok = consumed(t, rc, keys, pol, subject)
	require.True(t, ok, "the promoted replica has the subject's state")

	b := newProvider(t, clientConfig(replica.Addr(), 2*time.Second, 2), keys, pol)
	for i := 0; ; i++ {
		require.Less(t, i, 2*failoverLimit, "the promoted replica never denied")
		out := ask(b, pol.ID(), subject, 1)
		require.Equal(t, ratelimit.KindEvaluated, out.Kind(), "after the promotion every decision is Evaluated: %v", out)
		if !ratelimit.Admitted(out) {
			break
		}
		run.onPromoted++
	}
	out := ask(b, pol.ID(), subject, 1)
	require.Equal(t, ratelimit.KindEvaluated, out.Kind(), "%v", out)
	require.False(t, ratelimit.Admitted(out), "still denied")
	return run
}

// TestFailoverOverAdmissionIsTheUnreplicatedAdmits (fault-matrix row 13):
// a failover that loses acknowledged writes. The replica is frozen and
// partitioned from its primary (the primary drops the link), the primary
// acknowledges failoverUnreplicated more admits, dies, and the replica is
// promoted: its state is well-formed but behind (every decision on it is
// Evaluated), and the subject's total admits exceed the limit by exactly
// the unreplicated admits, never more. This provider does not WAIT, so it
// does not prevent that loss (R1 does not claim failover qualification).
func TestFailoverOverAdmissionIsTheUnreplicatedAdmits(t *testing.T) {
	for _, pol := range failoverPolicies(t) {
		t.Run(pol.Algorithm().String(), func(t *testing.T) {
			run := failover(t, pol, true)
			over := run.total() - failoverLimit
			t.Logf("%s: limit %d; admitted on the primary %d (%d replicated, %d acknowledged and lost); promoted replica had %d consumed, admitted %d more; total %d, over-admission %d",
				pol.Algorithm(), failoverLimit, run.onPrimary, failoverReplicated, failoverUnreplicated, run.replicated, run.onPromoted, run.total(), over)
			assert.Equal(t, int64(failoverReplicated), run.replicated, "the promoted replica is behind by the unreplicated admits")
			assert.Equal(t, failoverLimit-failoverReplicated, run.onPromoted)
			assert.Equal(t, failoverUnreplicated, over, "over-admission = acknowledged, unreplicated admits")
		})
	}
}

// TestFailoverFrozenReplicaStillBoundsOverAdmission runs the fault-matrix
// row 13 recipe literally: the replica is only frozen (SIGSTOP), the
// primary admits failoverUnreplicated more and is killed, the replica is
// thawed and promoted. The bound holds whatever the replica received:
// over-admission is within 0..failoverUnreplicated and equals exactly the
// admits the promoted replica lacks (it honours the state it has). On
// loopback it is 0: the primary's replication stream had already reached
// the frozen replica's socket receive buffer, and the replica applies it on
// waking, before it reads the end of the dead primary's link. Freezing a
// replica alone does not lose writes; a cut link does (the test above).
func TestFailoverFrozenReplicaStillBoundsOverAdmission(t *testing.T) {
	for _, pol := range failoverPolicies(t) {
		t.Run(pol.Algorithm().String(), func(t *testing.T) {
			run := failover(t, pol, false)
			over := run.total() - failoverLimit
			lost := int64(run.onPrimary) - run.replicated
			t.Logf("%s: limit %d; admitted on the primary %d (%d confirmed replicated before the freeze); promoted replica had %d consumed, admitted %d more; total %d, over-admission %d",
				pol.Algorithm(), failoverLimit, run.onPrimary, failoverReplicated, run.replicated, run.onPromoted, run.total(), over)
			assert.Equal(t, lost, int64(over), "over-admission = admits the promoted replica lacks")
			assert.GreaterOrEqual(t, over, 0)
			assert.LessOrEqual(t, over, failoverUnreplicated, "bounded by the admits acknowledged after the freeze")
		})
	}
}
