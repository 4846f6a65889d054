package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest/rediscluster"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest/redisserver"
	"github.com/tech-log/tech-log-backend/shared-contract/keyspace"
)

// clusterPrimaries is the size of the demo cluster (primaries only: the
// demo shows placement, not failover).
const (
	clusterPrimaries = 3
	clusterSlots     = keyspace.ClusterSlots
	clusterReadyWait = 30 * time.Second
)

// redisCluster is the demo's private Redis Cluster.
type redisCluster struct {
	nodes   []*redisserver.Process
	clients []*redis.Client
}

// startCluster starts clusterPrimaries cluster-enabled redis-servers on
// free 127.0.0.1 ports (redisserver's one launcher and port retry), joins
// them with an even third of the slots each and waits until every node
// reports the cluster healthy (rediscluster: the one cluster bootstrapper,
// redistest's too).
func startCluster(ctx context.Context, dir string) (c *redisCluster, err error) {
	c = &redisCluster{}
	defer func() {
		if err != nil {
			c.stop()
		}
	}()
	ctx, cancel := context.WithTimeout(ctx, clusterReadyWait)
	defer cancel()
	for i := range clusterPrimaries {
		nodeDir := filepath.Join(dir, "node-"+strconv.Itoa(i))
		if err := os.MkdirAll(nodeDir, 0o700); err != nil {
			return c, err
		}
		p, err := redisserver.Launch(ctx, redisserver.Config{Dir: nodeDir, Cluster: true, Args: []string{"--cluster-node-timeout", "2000"}})
		if errors.Is(err, redisserver.ErrNotFound) {
			return c, errors.New("redis-server is not on PATH; install it (Debian/Ubuntu: apt-get install redis-server) and run again")
		}
		if err != nil {
			return c, fmt.Errorf("cluster node %d did not come up (see %s): %w", i, nodeDir, err)
		}
		c.nodes = append(c.nodes, p)
		c.clients = append(c.clients, redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1, DialerRetries: 1}))
	}
	if _, err := rediscluster.Join(ctx, c.clients, clusterPrimaries); err != nil {
		return c, err
	}
	if err := rediscluster.WaitHealthy(ctx, c.clients); err != nil {
		return c, fmt.Errorf("cluster not healthy within %v: %w", clusterReadyWait, err)
	}
	return c, nil
}

// addrs returns the nodes' addresses (APP_RATE_LIMIT_REDIS_ADDRS).
func (c *redisCluster) addrs() []string {
	out := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		out[i] = n.Addr()
	}
	return out
}

// keysPerNode returns each node's DBSIZE (the demo's keys: nothing else is
// stored), -1 for a node that did not answer.
func (c *redisCluster) keysPerNode(ctx context.Context) []int64 {
	out := make([]int64, len(c.clients))
	for i, cl := range c.clients {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		n, err := cl.DBSize(ctx).Result()
		cancel()
		if err != nil {
			n = -1
		}
		out[i] = n
	}
	return out
}

// stop ends every node and closes the admin clients; it may be called more
// than once.
func (c *redisCluster) stop() {
	for _, cl := range c.clients {
		_ = cl.Close()
	}
	c.clients = nil
	for _, n := range c.nodes {
		_ = n.Stop(stopWait)
	}
}

// clusterEnv turns a standalone instance environment into a cluster one.
func clusterEnv(env []string, addrs []string) []string {
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if !strings.HasPrefix(kv, "APP_RATE_LIMIT_REDIS_ADDR=") {
			out = append(out, kv)
		}
	}
	return append(out, "APP_RATE_LIMIT_REDIS_MODE=cluster", "APP_RATE_LIMIT_REDIS_ADDRS="+strings.Join(addrs, ","))
}
