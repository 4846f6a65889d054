package rediscluster_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redisinfo"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest/rediscluster"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest/redisserver"
	"github.com/tech-log/tech-log-backend/shared-contract/keyspace"
)

func TestJoinRefusesUnevenReplicas(t *testing.T) {
	t.Parallel()
	nodes := make([]*redis.Client, 4) // never dialled: refused up front
	for _, primaries := range []int{0, 3, 5} {
		_, err := rediscluster.Join(context.Background(), nodes, primaries)
		assert.ErrorContains(t, err, "4 nodes, "+strconv.Itoa(primaries)+" primaries", "primaries %d", primaries)
	}
}

// TestJoinWaitHealthy joins 2 primaries with a replica each, launched
// with redisserver (no testing.TB needed), and checks what Healthy
// promises: before the join it names the failing node, after it every
// slot is served by one of the nodes and each replica's link is up.
func TestJoinWaitHealthy(t *testing.T) {
	if testing.Short() {
		t.Skip("starts redis-server")
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("REDIS_REQUIRED") == "1" {
			t.Fatal("redis-server not on PATH and REDIS_REQUIRED=1")
		}
		t.Skip("redis-server not on PATH")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var nodes []*redis.Client
	for i := range 4 {
		dir := filepath.Join(t.TempDir(), strconv.Itoa(i))
		require.NoError(t, os.Mkdir(dir, 0o700))
		p, err := redisserver.Launch(ctx, redisserver.Config{Dir: dir, Cluster: true, Args: []string{"--cluster-node-timeout", "2000"}})
		require.NoError(t, err)
		t.Cleanup(p.Kill)
		c := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1})
		t.Cleanup(func() { _ = c.Close() })
		nodes = append(nodes, c)
	}
	err := rediscluster.Healthy(ctx, nodes)
	require.ErrorContains(t, err, "node "+nodes[0].Options().Addr+": CLUSTER INFO: state fail, slots ok 0", "not joined yet")

	ids, err := rediscluster.Join(ctx, nodes, 2)
	require.NoError(t, err)
	require.Len(t, ids, 4)
	require.NoError(t, rediscluster.WaitHealthy(ctx, nodes))

	owners, err := rediscluster.SlotOwners(ctx, nodes[3])
	require.NoError(t, err)
	half := keyspace.ClusterSlots / 2
	assert.Equal(t, nodes[0].Options().Addr, owners[0])
	assert.Equal(t, nodes[0].Options().Addr, owners[half-1])
	assert.Equal(t, nodes[1].Options().Addr, owners[half])
	assert.Equal(t, nodes[1].Options().Addr, owners[keyspace.ClusterSlots-1])
	for i, c := range nodes {
		repl, err := rediscluster.Replication(ctx, c)
		require.NoError(t, err)
		if i < 2 {
			assert.Equal(t, redisinfo.RolePrimary, repl.Role, "node %d", i)
			assert.Len(t, repl.Replicas, 1, "node %d", i)
		} else {
			assert.Equal(t, redisinfo.RoleReplica, repl.Role, "node %d", i)
			assert.True(t, repl.LinkUp, "node %d", i)
		}
	}
	myself, err := nodes[2].Do(ctx, "cluster", "myid").Text()
	require.NoError(t, err)
	assert.Equal(t, ids[2], myself)

	require.NoError(t, nodes[0].Do(ctx, "cluster", "delslots", 0).Err())
	assert.Error(t, rediscluster.Healthy(ctx, nodes), "a slot without a primary")
}
