package redistest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redisinfo"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest/rediscluster"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest/redisserver"
	"github.com/tech-log/tech-log-backend/shared-contract/keyspace"
)

// ClusterSlots is the number of hash slots of a Redis Cluster
// (keyspace.ClusterSlots).
const ClusterSlots = keyspace.ClusterSlots

// Defaults of [StartCluster].
const (
	// DefaultClusterPrimaries is the number of primaries StartCluster creates.
	DefaultClusterPrimaries = 3
	// DefaultClusterNodeTimeout is the cluster-node-timeout of every node:
	// short enough that a killed primary is replaced in a few seconds, long
	// enough that a busy 2-core machine does not fail nodes over by itself.
	DefaultClusterNodeTimeout = 2 * time.Second
	// topologyTimeout bounds every wait for a topology to settle.
	topologyTimeout = 30 * time.Second
	// failoverRetry is how long Failover waits for one CLUSTER FAILOVER
	// before it asks again (Redis abandons a manual failover after 5 s).
	failoverRetry = 7 * time.Second
	// pollInterval is the pause between two polls of a topology wait.
	pollInterval = 50 * time.Millisecond
)

// ClusterOption configures the cluster [StartCluster] creates.
type ClusterOption func(*clusterConfig)

type clusterConfig struct {
	primaries   int
	replicas    int // per primary
	nodeTimeout time.Duration
	opts        []Option
}

// WithPrimaries sets the number of primaries (1..16; default 3).
func WithPrimaries(n int) ClusterOption { return func(c *clusterConfig) { c.primaries = n } }

// WithReplicasPerPrimary sets the replicas of each primary (0..4; default 1).
func WithReplicasPerPrimary(n int) ClusterOption { return func(c *clusterConfig) { c.replicas = n } }

// WithNodeTimeout sets cluster-node-timeout (at least 100ms; default
// DefaultClusterNodeTimeout).
func WithNodeTimeout(d time.Duration) ClusterOption {
	return func(c *clusterConfig) { c.nodeTimeout = d }
}

// WithNodeConfig sets a redis.conf directive on every node (see WithConfig).
func WithNodeConfig(name, value string) ClusterOption {
	return func(c *clusterConfig) { c.opts = append(c.opts, WithConfig(name, value)) }
}

func (c *clusterConfig) validate() error {
	var errs []error
	if c.primaries < 1 || c.primaries > 16 {
		errs = append(errs, fmt.Errorf("redistest: cluster primaries %d: want 1..16", c.primaries))
	}
	if c.replicas < 0 || c.replicas > 4 {
		errs = append(errs, fmt.Errorf("redistest: cluster replicas per primary %d: want 0..4", c.replicas))
	}
	if c.nodeTimeout < 100*time.Millisecond {
		errs = append(errs, fmt.Errorf("redistest: cluster node timeout %v: want at least 100ms", c.nodeTimeout))
	}
	return errors.Join(errs...)
}

// Cluster is a Redis Cluster private to one test: loopback redis-server
// processes, the first Primaries of Nodes created as primaries with an even
// share of the slots, each followed by its replicas. Every node is a
// [Server] (Kill, Restart, Pause, admin client), removed with t.Cleanup.
type Cluster struct {
	t         testing.TB
	nodes     []*Server
	ids       []string
	primaries int
}

// StartCluster creates a Redis Cluster (by default 3 primaries with one
// replica each) and returns once every node reports cluster_state:ok, knows
// every other node, and every replica's link to its primary is up. It needs
// the process lane (nodes reach each other on 127.0.0.1): in another lane it
// skips t. Skips and failures otherwise follow [Start].
func StartCluster(t testing.TB, opts ...ClusterOption) *Cluster {
	t.Helper()
	cfg := clusterConfig{primaries: DefaultClusterPrimaries, replicas: 1, nodeTimeout: DefaultClusterNodeTimeout}
	for _, o := range opts {
		o(&cfg)
	}
	if err := cfg.validate(); err != nil {
		t.Fatal(err)
	}
	requireProcessLane(t, "a cluster")

	n := cfg.primaries * (1 + cfg.replicas)
	c := &Cluster{t: t, primaries: cfg.primaries}
	for range n {
		// The bus port is chosen with the client port on each start
		// attempt (withClusterNode): chosen up front, it could be handed
		// to another node as its client port before this node binds it.
		nodeOpts := append([]Option{
			withClusterNode(),
			WithConfig("cluster-node-timeout", strconv.FormatInt(cfg.nodeTimeout.Milliseconds(), 10)),
			WithConfig("cluster-replica-validity-factor", "0"),
			WithConfig("cluster-allow-replica-migration", "no"),
			WithConfig("repl-diskless-sync-delay", "0"),
		}, cfg.opts...)
		c.nodes = append(c.nodes, Start(t, nodeOpts...))
	}

	ctx, cancel := context.WithTimeout(context.Background(), topologyTimeout)
	defer cancel()
	ids, err := rediscluster.Join(ctx, clients(c.nodes), cfg.primaries)
	if err != nil {
		t.Fatalf("redistest: create cluster: %v", err)
	}
	c.ids = ids
	if err := c.waitHealthy(ctx); err != nil {
		t.Fatalf("redistest: cluster not healthy within %v: %v", topologyTimeout, err)
	}
	return c
}

// requireProcessLane skips t unless the environment selects the process lane.
func requireProcessLane(t testing.TB, what string) {
	t.Helper()
	if testing.Short() {
		t.Skip("redistest: skipping Redis test under -short")
	}
	e, err := readEnv(os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	if e.lane != LaneProcess {
		t.Skipf("redistest: %s runs in the process lane only (%s=%s)", what, EnvLane, e.lane)
	}
}

// withClusterNode has the process lane start a cluster node
// (redisserver.Config.Cluster: cluster-enabled, nodes.conf, and a bus port
// chosen with the client port on every start attempt).
func withClusterNode() Option { return func(c *config) { c.clusterNode = true } }

// poll calls f until it succeeds or ctx ends, returning f's last error
// (redisserver.Poll every pollInterval).
func poll(ctx context.Context, f func() error) error {
	return redisserver.Poll(ctx, pollInterval, f)
}

// clients returns the admin clients of nodes (rediscluster's arguments).
func clients(nodes []*Server) []*redis.Client {
	out := make([]*redis.Client, len(nodes))
	for i, s := range nodes {
		out[i] = s.Client()
	}
	return out
}

// Nodes returns every node, in creation order (the first Primaries were
// created as primaries). Killed nodes stay in the list.
func (c *Cluster) Nodes() []*Server { return append([]*Server(nil), c.nodes...) }

// Addrs returns every node's address: seed addresses for a client.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.nodes))
	for i, s := range c.nodes {
		addrs[i] = s.Addr()
	}
	return addrs
}

// Node returns the node at addr, or nil.
func (c *Cluster) Node(addr string) *Server { return serverAt(c.nodes, addr) }

// serverAt returns the server of servers at addr, or nil.
func serverAt(servers []*Server, addr string) *Server {
	for _, s := range servers {
		if s.Addr() == addr {
			return s
		}
	}
	return nil
}

// ID returns the cluster node id of s.
func (c *Cluster) ID(s *Server) string {
	for i, n := range c.nodes {
		if n == s {
			return c.ids[i]
		}
	}
	c.t.Fatalf("redistest: %s is not a node of this cluster", s.Addr())
	return ""
}

// live returns the nodes whose process runs.
func (c *Cluster) live() []*Server {
	var out []*Server
	for _, s := range c.nodes {
		if s.PID() != 0 {
			out = append(out, s)
		}
	}
	return out
}

// Primaries returns the running nodes whose role is master, in node order.
func (c *Cluster) Primaries() []*Server {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var out []*Server
	for _, s := range c.live() {
		role, err := nodeRole(ctx, s)
		if err != nil {
			c.t.Fatalf("redistest: node %s: %v", s.Addr(), err)
		}
		if role == "master" {
			out = append(out, s)
		}
	}
	return out
}

// nodeRole returns the first element of ROLE: "master" or "slave".
func nodeRole(ctx context.Context, s *Server) (string, error) {
	v, err := s.Client().Do(ctx, "role").Slice()
	if err != nil || len(v) == 0 {
		return "", fmt.Errorf("ROLE: %v (reply %v)", err, v)
	}
	role, _ := v[0].(string)
	return role, nil
}

// SlotOwner returns the primary that serves slot according to the first
// running node that answers CLUSTER SLOTS.
func (c *Cluster) SlotOwner(slot int) *Server {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	owners, err := c.slotOwners(ctx)
	if err != nil {
		c.t.Fatalf("redistest: %v", err)
	}
	s := c.Node(owners[slot])
	if s == nil {
		c.t.Fatalf("redistest: slot %d has no known owner (%q)", slot, owners[slot])
	}
	return s
}

// slotOwners maps every slot to its primary's address ("" when unserved),
// as the first running node that answers CLUSTER SLOTS sees it.
func (c *Cluster) slotOwners(ctx context.Context) (rediscluster.SlotMap, error) {
	var lastErr error
	for _, s := range c.live() {
		owners, err := rediscluster.SlotOwners(ctx, s.Client())
		if err == nil {
			return owners, nil
		}
		lastErr = err
	}
	return rediscluster.SlotMap{}, fmt.Errorf("no running node answered CLUSTER SLOTS (last: %w)", lastErr)
}

// WaitHealthy waits (bounded) until every running node reports
// cluster_state:ok and all slots ok, every running node agrees on each
// slot's primary, every primary of a slot runs, and every running replica's
// link to its primary is up. Call it after a failover or a restart.
func (c *Cluster) WaitHealthy() {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), topologyTimeout)
	defer cancel()
	if err := c.waitHealthy(ctx); err != nil {
		c.t.Fatalf("redistest: cluster not healthy within %v: %v", topologyTimeout, err)
	}
}

// WaitReplicated waits (bounded by the topology timeout) until every running
// primary has at least one replica whose link is online and whose offset has
// reached the primary's: after a failover or a restart, a WAIT 1 on any
// primary can then be acknowledged. It fails the test when that does not
// happen in time.
func (c *Cluster) WaitReplicated() {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), topologyTimeout)
	defer cancel()
	err := poll(ctx, func() error {
		for _, s := range c.live() {
			repl, err := rediscluster.Replication(ctx, s.Client())
			if err != nil {
				return err
			}
			if repl.Role == redisinfo.RolePrimary && !repl.CaughtUp() {
				return fmt.Errorf("primary %s: no online replica at offset %d", s.Addr(), repl.Offset)
			}
		}
		return nil
	})
	if err != nil {
		c.t.Fatalf("redistest: cluster replicas not online within %v: %v", topologyTimeout, err)
	}
}

func (c *Cluster) waitHealthy(ctx context.Context) error {
	return rediscluster.WaitHealthy(ctx, clients(c.live()))
}

// CommandCalls sums INFO commandstats calls of the named commands (lower
// case, e.g. "evalsha", "eval") over every running node: commands that ran,
// not those refused before running (MOVED, ASK, ...).
func (c *Cluster) CommandCalls(commands ...string) int64 {
	c.t.Helper()
	return sumCommandCalls(c.t, c.live(), commands)
}

// ResetStats runs CONFIG RESETSTAT on every running node.
func (c *Cluster) ResetStats() {
	c.t.Helper()
	resetStats(c.t, c.live())
}

// Slot returns the cluster hash slot of key (keyspace.Slot: CRC16 XMODEM of
// the key or of its hash tag, modulo keyspace.ClusterSlots).
func Slot(key string) int { return keyspace.Slot(key) }
