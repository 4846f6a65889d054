package redisrate

// The cluster lane: a private Redis Cluster of 3 primaries + 3 replicas
// (redistest.StartCluster, loopback processes). Calls are counted with
// INFO commandstats summed over every node: replicas receive a script's
// effects, never the EVALSHA, so the sum is the program calls that ran.

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
	"github.com/tech-log/tech-log-backend/shared-contract/keyspace"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit/ratelimittest"
)

// clusterConfig is the client configuration of the cluster and sentinel
// tests. Their exact counts (calls = evaluations, Remaining after each step)
// need every call decided by its reply, so the command timeout leaves a
// loaded machine ample room: a dead node answers at once (connection
// refused or reset), so no test waits it out.
func clusterConfig() ClientConfig {
	return ClientConfig{
		Protocol:       ProtocolRESP2,
		CommandTimeout: clusterTimeout,
		DialTimeout:    clusterTimeout,
		PoolSize:       16,
		PoolTimeout:    time.Second,
	}
}

// clusterTimeout is the command and dial timeout of clusterConfig.
const clusterTimeout = 2 * time.Second

// clusterProvider builds and starts a Provider on the cluster at addrs.
func clusterProvider(t testing.TB, addrs []string, keys *keyspace.Builder, policies []ratelimit.Policy, mutate ...func(*ClientConfig)) *Provider {
	t.Helper()
	return clusterProviderAcks(t, addrs, keys, policies, 0, mutate...)
}

// clusterProviderAcks is clusterProvider with ReplicationAcks acks.
func clusterProviderAcks(t testing.TB, addrs []string, keys *keyspace.Builder, policies []ratelimit.Policy, acks int, mutate ...func(*ClientConfig)) *Provider {
	t.Helper()
	cfg := clusterConfig()
	for _, m := range mutate {
		m(&cfg)
	}
	cc, err := NewClusterClient(cfg, addrs)
	require.NoError(t, err)
	opts := Options{CommandTimeout: cfg.CommandTimeout, MaxInFlight: cfg.PoolSize, ReplicationAcks: acks}
	if acks > 0 {
		opts.ReplicationAckTimeout = cfg.CommandTimeout / 2
	}
	p, err := New(cc, keys, policies, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, p.Start(ctx))
	return p
}

// programCalls is the program calls that ran over every node.
func programCalls(c *redistest.Cluster) int64 { return c.CommandCalls("evalsha", "eval") }

func TestClusterConformance(t *testing.T) {
	c := redistest.StartCluster(t)
	keys := randomKeys(t)
	ratelimittest.Run(t, func(t *testing.T, policies []ratelimit.Policy) ratelimit.EdgePort {
		return clusterProvider(t, c.Addrs(), keys, policies)
	})
}

// TestClusterConformanceSets runs the set suite (RunSets) on the cluster (a
// subject's members share its slot: one set-program call).
func TestClusterConformanceSets(t *testing.T) {
	c := redistest.StartCluster(t)
	keys := randomKeys(t)
	ratelimittest.RunSets(t, func(t *testing.T, policies []ratelimit.Policy) ratelimit.EdgePort {
		return clusterProvider(t, c.Addrs(), keys, policies)
	})
}

// TestClusterKeysOnEveryPrimary: subjects land on every primary, every
// decision is exactly the model's, and calls summed over all nodes equal
// the evaluations (each ran once, none twice); Start loaded the programs
// on every primary.
func TestClusterKeysOnEveryPrimary(t *testing.T) {
	c := redistest.StartCluster(t)
	keys := randomKeys(t)
	policies := conformancePolicies(t, 1)
	p := clusterProvider(t, c.Addrs(), keys, policies)
	ctx := redistest.AdminCtx(t)
	for _, n := range c.Primaries() {
		for _, s := range p.scripts {
			ok, err := n.Client().ScriptExists(ctx, s.SHA()).Result()
			require.NoError(t, err)
			assert.Equal(t, []bool{true}, ok, "Start warmed %s up on %s", s.Name(), n.Addr())
		}
	}
	c.ResetStats()
	perPrimary := map[*redistest.Server]int{}
	evaluations := int64(0)
	for i := range 24 {
		s := randomSubject(t)
		pol := policies[i%len(policies)]
		key, err := StateKey(keys, pol, s)
		require.NoError(t, err)
		perPrimary[c.SlotOwner(redistest.Slot(key))]++
		for j := range 6 {
			out := ask(p, pol.ID(), s, 1)
			evaluations++
			e, ok := out.(ratelimit.Evaluated)
			require.Truef(t, ok, "%v", out)
			assert.Equal(t, j < 5, e.Decision.Allowed, "request %d of a limit of 5", j+1)
		}
	}
	assert.Len(t, perPrimary, 3, "keys on every primary")
	assert.Equal(t, evaluations, programCalls(c), "calls over every node = evaluations")
	assert.Zero(t, c.CommandCalls("eval"), "warm-up: no EVAL fallback")
}

// subjectInSlot returns a fresh subject whose state key under pol is in
// slot.
func subjectInSlot(t testing.TB, keys *keyspace.Builder, pol ratelimit.Policy, slot int) ratelimit.SubjectDigest {
	t.Helper()
	for range 1 << 20 {
		s := randomSubject(t)
		key, err := StateKey(keys, pol, s)
		require.NoError(t, err)
		if keySlot(key) == slot {
			return s
		}
	}
	t.Fatalf("no subject found in slot %d", slot)
	return ""
}

// TestClusterReshardingAskThenMoved moves one slot from primary A to B
// under the provider: while the slot is MIGRATING a new key is answered
// ASK (followed with ASKING on B), an existing key is served by A; after
// MIGRATE and SETSLOT NODE the old key is answered MOVED (followed, and the
// slot map updated). Every decision is Evaluated and exact, and calls
// summed over every node = evaluations: no program ran twice.
func TestClusterReshardingAskThenMoved(t *testing.T) {
	c := redistest.StartCluster(t)
	keys := randomKeys(t)
	pol := fixedPolicy(t, "reshard", 5, time.Hour)
	p := clusterProvider(t, c.Addrs(), keys, []ratelimit.Policy{pol})
	ctx := redistest.AdminCtx(t)

	old := randomSubject(t)
	oldKey, err := StateKey(keys, pol, old)
	require.NoError(t, err)
	slot := keySlot(oldKey)
	a := c.SlotOwner(slot)
	var b *redistest.Server
	for _, n := range c.Primaries() {
		if n != a {
			b = n
			break
		}
	}
	fresh := subjectInSlot(t, keys, pol, slot)

	want := func(s ratelimit.SubjectDigest, allowed bool, remaining int64) {
		t.Helper()
		e, ok := ask(p, pol.ID(), s, 1).(ratelimit.Evaluated)
		require.True(t, ok)
		assert.Equal(t, allowed, e.Decision.Allowed)
		assert.Equal(t, remaining, e.Decision.Remaining)
	}
	c.ResetStats()
	want(old, true, 4)
	want(old, true, 3)

	// MIGRATING on A, IMPORTING on B.
	require.NoError(t, b.Client().Do(ctx, "cluster", "setslot", slot, "importing", c.ID(a)).Err())
	require.NoError(t, a.Client().Do(ctx, "cluster", "setslot", slot, "migrating", c.ID(b)).Err())
	want(old, true, 2)   // the key is still on A: A runs it
	want(fresh, true, 4) // not on A: ASK B, ASKING + EVALSHA on B
	want(fresh, true, 3)
	n, err := b.Client().ClusterCountKeysInSlot(ctx, slot).Result()
	require.NoError(t, err)
	assert.EqualValues(t, 1, n, "the new key was created on B")
	n, err = a.Client().ClusterCountKeysInSlot(ctx, slot).Result()
	require.NoError(t, err)
	assert.EqualValues(t, 1, n, "A keeps only the old key")

	// MIGRATE the old key, then the slot belongs to B everywhere.
	host, port, _ := net.SplitHostPort(b.Addr())
	require.NoError(t, a.Client().Do(ctx, "migrate", host, port, oldKey, 0, 5000).Err())
	c.SetSlotNode(slot, b, a)
	want(old, true, 1) // MOVED B, followed
	want(old, true, 0) // straight to B
	want(old, false, 0)
	require.NotNil(t, p.router.SlotOwner(slot))
	assert.Equal(t, b.Addr(), p.router.SlotOwner(slot).Addr(), "the slot map follows MOVED")
	assert.EqualValues(t, 8, programCalls(c), "8 evaluations, 8 calls that ran over all nodes")

	assert.Positive(t, redistest.CommandStats(t, b.Client())["asking"].Calls, "ASKING was sent to B")
}

// TestClusterDownIsUnavailable: while a slot is unassigned the cluster
// answers CLUSTERDOWN before running anything; the provider follows it at
// most MaxClusterHops times, answers Unavailable{server_rejected}, and no
// call ran. Once the slot is back, the same provider evaluates.
func TestClusterDownIsUnavailable(t *testing.T) {
	c := redistest.StartCluster(t)
	keys := randomKeys(t)
	pol := fixedPolicy(t, "down", 5, time.Hour)
	p := clusterProvider(t, c.Addrs(), keys, []ratelimit.Policy{pol})
	ctx := redistest.AdminCtx(t)
	s := randomSubject(t)
	key, err := StateKey(keys, pol, s)
	require.NoError(t, err)
	// Another slot than the key's: the whole cluster goes down.
	other := (keySlot(key) + 1) % redistest.ClusterSlots
	owner := c.SlotOwner(other)
	for _, n := range c.Nodes() {
		require.NoError(t, n.Client().Do(ctx, "cluster", "delslots", other).Err())
	}
	require.NoError(t, clusterState(ctx, c.SlotOwner(keySlot(key)), "fail"))

	c.ResetStats()
	out := ask(p, pol.ID(), s, 1)
	u, ok := out.(ratelimit.Unavailable)
	require.Truef(t, ok, "%v", out)
	assert.Equal(t, ratelimit.CategoryServerRejected, u.Category)
	assert.Zero(t, programCalls(c), "CLUSTERDOWN: nothing ran")

	require.NoError(t, owner.Client().Do(ctx, "cluster", "addslots", other).Err())
	c.WaitHealthy()
	e, ok := ask(p, pol.ID(), s, 1).(ratelimit.Evaluated)
	require.True(t, ok)
	assert.Equal(t, int64(4), e.Decision.Remaining)
	assert.EqualValues(t, 1, programCalls(c))
}

// TestClusterNewPrimaryAfterFailover: after CLUSTER FAILOVER the provider
// meets a primary it has never qualified: it checks the version and loads
// the programs there before the first call (no EVAL); a primary whose
// script cache is flushed gets exactly one EVAL fallback.
func TestClusterNewPrimaryAfterFailover(t *testing.T) {
	c := redistest.StartCluster(t)
	keys := randomKeys(t)
	pol := fixedPolicy(t, "failover", 100, time.Hour)
	p := clusterProvider(t, c.Addrs(), keys, []ratelimit.Policy{pol})
	ctx := redistest.AdminCtx(t)
	s := randomSubject(t)
	key, err := StateKey(keys, pol, s)
	require.NoError(t, err)
	old := c.SlotOwner(keySlot(key))
	for i := range 3 {
		e, ok := ask(p, pol.ID(), s, 1).(ratelimit.Evaluated)
		require.True(t, ok)
		assert.Equal(t, int64(99-i), e.Decision.Remaining)
	}
	replica := c.ReplicasOf(old)[0]
	// Forget the scripts on the replica, so that only the provider's own
	// warm-up can load them (scripts do not follow replication).
	require.NoError(t, replica.Client().ScriptFlush(ctx).Err())
	c.Failover(replica)
	c.ResetStats()

	// The first call goes to the old primary (the provider's map is old):
	// MOVED to the replica, qualified, then EVALSHA there.
	var outs []ratelimit.Outcome
	for range 3 {
		outs = append(outs, ask(p, pol.ID(), s, 1))
	}
	for i, out := range outs {
		e, ok := out.(ratelimit.Evaluated)
		require.Truef(t, ok, "%v", out)
		assert.Equal(t, int64(96-i), e.Decision.Remaining, "the state replicated and continues")
	}
	assert.EqualValues(t, 3, programCalls(c))
	assert.Zero(t, c.CommandCalls("eval"), "the new primary was warmed up")

	// SCRIPT FLUSH on the serving primary: one NOSCRIPT, exactly one EVAL.
	require.NoError(t, replica.Client().ScriptFlush(ctx).Err())
	c.ResetStats()
	e, ok := ask(p, pol.ID(), s, 1).(ratelimit.Evaluated)
	require.True(t, ok)
	assert.Equal(t, int64(93), e.Decision.Remaining)
	assert.EqualValues(t, 1, c.CommandCalls("eval"), "exactly one EVAL")
}

// TestClusterConcurrentProvidersNeverAboveLimit: 4 providers x 64
// goroutines on 8 hot subjects spread over the primaries, no faults:
// every request is Evaluated and exactly limit requests per subject are
// admitted; calls over every node = requests. The timeouts (10 s) leave a
// loaded machine room to decide every call: the lane allows no failure.
func TestClusterConcurrentProvidersNeverAboveLimit(t *testing.T) {
	c := redistest.StartCluster(t)
	keys := randomKeys(t)
	const limit, subjects, providers, workers, perWorker = 50, 8, 4, 64, 4
	pol := fixedPolicy(t, "hot", limit, time.Hour)
	var ps []*Provider
	for range providers {
		ps = append(ps, clusterProvider(t, c.Addrs(), keys, []ratelimit.Policy{pol}, func(c *ClientConfig) {
			c.PoolSize = workers // MaxInFlight = PoolSize: no admission refusals
			c.CommandTimeout, c.DialTimeout, c.PoolTimeout = noFaultTimeout, noFaultTimeout, noFaultTimeout
		}))
	}
	subs := make([]ratelimit.SubjectDigest, subjects)
	for i := range subs {
		subs[i] = randomSubject(t)
	}
	c.ResetStats()
	// 1024 requests, 128 per subject; no fault: every call is decided.
	admitted, other := hotSubjectLoad(t, ps, pol.ID(), subs, workers, perWorker)
	assertHotSubjectLimits(t, c, subs, admitted, other, limit, providers*workers*perWorker)
}

// noFaultTimeout is the command, dial and pool timeout of the cluster
// tests that inject no fault and count exactly: long enough that a loaded
// machine decides every call, so a failure is a defect, never noise.
const noFaultTimeout = 10 * time.Second
