package redistest

import (
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest/rediscluster"
)

func TestSlot(t *testing.T) {
	// CRC-16/XMODEM check value, and the examples of the cluster spec.
	assert.Equal(t, 0x31C3, Slot("123456789"))
	assert.Equal(t, Slot("user1000"), Slot("{user1000}.following"))
	assert.Equal(t, Slot("user1000"), Slot("{user1000}.followers"))
	assert.Equal(t, Slot("bar"), Slot("foo{bar}{zap}"), "only the first tag counts")
}

// TestCommandStats: calls counted since CONFIG RESETSTAT, exactly; a
// command that did not run has no entry.
func TestCommandStats(t *testing.T) {
	s := Start(t)
	ctx := AdminCtx(t)
	resetStats(t, []*Server{s})
	for range 3 {
		require.ErrorIs(t, s.Client().Get(ctx, "no-such-key").Err(), redis.Nil)
	}
	stats := CommandStats(t, s.Client())
	assert.EqualValues(t, 3, stats["get"].Calls)
	assert.NotContains(t, stats, "set")
	assert.EqualValues(t, 6, sumCommandCalls(t, []*Server{s, s}, []string{"get", "set"}), "summed over nodes and commands")
}

// setScript writes its key: effects replication sends replicas the SET,
// never the EVAL, so eval calls count once over all nodes.
const setScript = "#!lua\nreturn redis.call('set', KEYS[1], '1')"

func TestClusterTopology(t *testing.T) {
	c := StartCluster(t)
	ctx := AdminCtx(t)
	require.Len(t, c.Nodes(), 6)
	primaries := c.Primaries()
	require.Len(t, primaries, 3)
	for _, p := range primaries {
		assert.Len(t, c.ReplicasOf(p), 1, "replicas of %s", p.Addr())
	}

	// Slot agrees with the server, and every primary owns a third of the
	// slots.
	owned := map[string]int{}
	for slot := range ClusterSlots {
		owned[c.SlotOwner(slot).Addr()]++
		if slot > 4 {
			break
		}
	}
	for i := range 200 {
		key := fmt.Sprintf("k%d{t%d}", i, i%7)
		want, err := primaries[0].Client().ClusterKeySlot(ctx, key).Result()
		require.NoError(t, err)
		assert.EqualValues(t, want, Slot(key), key)
	}
	for _, p := range primaries {
		n, err := p.Client().ClusterCountKeysInSlot(ctx, 0).Result()
		require.NoError(t, err)
		assert.Zero(t, n)
	}

	// A cluster client works against the seeds; calls are counted on the
	// node that ran them only.
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), MaxRedirects: -1, Protocol: 3})
	t.Cleanup(func() { _ = cc.Close() })
	c.ResetStats()
	const keys = 30
	for i := range keys {
		require.NoError(t, cc.Eval(ctx, setScript, []string{fmt.Sprintf("key-%d", i)}).Err())
	}
	assert.EqualValues(t, keys, c.CommandCalls("eval"), "replicas receive the script's effects, not the script")
	perPrimary := map[*Server]int{}
	for i := range keys {
		perPrimary[c.SlotOwner(Slot(fmt.Sprintf("key-%d", i)))]++
	}
	assert.Len(t, perPrimary, 3, "30 keys land on every primary")
}

func TestClusterFailover(t *testing.T) {
	c := StartCluster(t)
	old := c.Primaries()[0]
	slot := c.slotOf(t, old)
	replica := c.ReplicasOf(old)[0]

	c.Failover(replica)
	assert.Same(t, replica, c.SlotOwner(slot), "the replica took the slots over")

	// SIGKILL of the new primary: the old one, now its replica, is
	// promoted.
	replica.Kill()
	c.WaitHealthy()
	assert.Same(t, old, c.SlotOwner(slot))
	assert.Len(t, c.Primaries(), 3)

	// A restarted node rejoins as a replica.
	replica.Restart()
	c.WaitHealthy()
	assert.Len(t, c.Primaries(), 3)
	assert.Equal(t, []*Server{replica}, c.ReplicasOf(old))
}

// slotOf returns a slot p serves.
func (c *Cluster) slotOf(t *testing.T, p *Server) int {
	t.Helper()
	for slot := 0; slot < ClusterSlots; slot += 97 {
		if c.SlotOwner(slot) == p {
			return slot
		}
	}
	t.Fatalf("%s serves no slot", p.Addr())
	return -1
}

func TestSentinelTopology(t *testing.T) {
	s := StartSentinel(t)
	ctx := AdminCtx(t)
	require.Len(t, s.Servers(), 3)
	require.Len(t, s.SentinelAddrs(), 3)
	for _, a := range s.SentinelAddrs() {
		host, _, err := net.SplitHostPort(a)
		require.NoError(t, err)
		assert.Equal(t, "127.0.0.1", host)
	}
	first := s.Master()
	assert.Same(t, s.Servers()[0], first)

	fc := redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName: s.MasterName(), SentinelAddrs: s.SentinelAddrs(), MaxRetries: -1, Protocol: 3,
		DialTimeout: time.Second, ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second,
	})
	t.Cleanup(func() { _ = fc.Close() })
	require.NoError(t, fc.Eval(ctx, setScript, []string{"k"}).Err())
	assert.EqualValues(t, 1, s.CommandCalls("eval"))

	second := s.Failover()
	ctx = AdminCtx(t)
	assert.NotSame(t, first, second)
	assert.Same(t, second, s.Master())
	// The failover client follows the switch: bounded retries of a
	// harmless read until it reaches the new master.
	var err error
	for range 50 {
		if err = fc.Set(ctx, "k", "2", 0).Err(); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	require.NoError(t, err, "set through the failover client after the switch")
	v, err := second.Client().Get(ctx, "k").Result()
	require.NoError(t, err)
	assert.Equal(t, "2", v)
}

func TestRandomKeys(t *testing.T) {
	a, b := RandomKeys(t), RandomKeys(t)
	assert.Regexp(t, `^t[0-9a-f]{12}$`, a.Prefix())
	assert.NotEqual(t, a.Prefix(), b.Prefix(), "each test its own prefix")
}

// TestClusterSetSlotNode: an (empty) slot migrated from its owner to
// another primary belongs to it on every node once SetSlotNode returns
// and the cluster settles.
func TestClusterSetSlotNode(t *testing.T) {
	c := StartCluster(t, WithReplicasPerPrimary(0))
	ctx := AdminCtx(t)
	const slot = 42
	a := c.SlotOwner(slot)
	var b *Server
	for _, p := range c.Primaries() {
		if p != a {
			b = p
			break
		}
	}
	require.NotNil(t, b)
	require.NoError(t, b.Client().Do(ctx, "cluster", "setslot", slot, "importing", c.ID(a)).Err())
	require.NoError(t, a.Client().Do(ctx, "cluster", "setslot", slot, "migrating", c.ID(b)).Err())
	c.SetSlotNode(slot, b, a)
	c.WaitHealthy()
	assert.Same(t, b, c.SlotOwner(slot))
	for _, n := range c.Nodes() {
		owners, err := rediscluster.SlotOwners(ctx, n.Client())
		require.NoError(t, err)
		assert.Equal(t, b.Addr(), owners[slot], "node %s", n.Addr())
	}
}

func TestLoad(t *testing.T) {
	var mu sync.Mutex
	seen := map[[2]int]int{}
	Load(3, 4, 0, nil, func(w, i int) {
		mu.Lock()
		defer mu.Unlock()
		seen[[2]int{w, i}]++
	})
	assert.Len(t, seen, 12, "every worker, every index")
	for k, n := range seen {
		assert.Equal(t, 1, n, "%v once", k)
	}

	stop := make(chan struct{})
	var calls atomic.Int64
	Load(4, 1000, time.Millisecond, Closed(stop), func(int, int) {
		if calls.Add(1) == 10 {
			close(stop)
		}
	})
	// Each worker asks done before every call: once stop is closed, at
	// most the 3 other workers finish the call they had begun.
	assert.GreaterOrEqual(t, calls.Load(), int64(10))
	assert.LessOrEqual(t, calls.Load(), int64(13), "stop ends the workers early")
}
