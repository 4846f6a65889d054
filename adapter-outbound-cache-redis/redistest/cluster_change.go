package redistest

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest/rediscluster"
)

// Failover runs CLUSTER FAILOVER (coordinated, no data loss) on replica
// and waits until it is a primary and the cluster is healthy. A manual
// failover needs the replica's link to its primary up, and Redis abandons
// it when it does not complete within its own timeout (5 s): so Failover
// first waits for the link, and asks again each failoverRetry until the
// replica is a primary, all within the topology timeout.
func (c *Cluster) Failover(replica *Server) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), topologyTimeout)
	defer cancel()
	err := poll(ctx, func() error {
		repl, err := rediscluster.Replication(ctx, replica.Client())
		if err != nil {
			return err
		}
		if !repl.LinkUp {
			return fmt.Errorf("node %s: link to its primary is not up", replica.Addr())
		}
		return nil
	})
	if err != nil {
		c.t.Fatalf("redistest: failover to %s: %v", replica.Addr(), err)
	}
	for attempt := 1; ; attempt++ {
		if err := replica.Client().Do(ctx, "cluster", "failover").Err(); err != nil {
			c.t.Fatalf("redistest: node %s: CLUSTER FAILOVER (attempt %d): %v", replica.Addr(), attempt, err)
		}
		try, cancelTry := context.WithTimeout(ctx, failoverRetry)
		err = poll(try, func() error {
			role, err := nodeRole(try, replica)
			if err != nil {
				return err
			}
			if role != "master" {
				return fmt.Errorf("node %s is still a %s", replica.Addr(), role)
			}
			return nil
		})
		cancelTry()
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			c.t.Fatalf("redistest: failover to %s after %d attempts: %v", replica.Addr(), attempt, err)
		}
	}
	if err := c.waitHealthy(ctx); err != nil {
		c.t.Fatalf("redistest: cluster not healthy after the failover to %s: %v", replica.Addr(), err)
	}
}

// SetSlotNode ends the migration of slot from source to target: CLUSTER
// SETSLOT slot NODE target on target first, then on source, then on every
// other primary (replicas learn it by gossip). That is the documented
// order: with source first, source sends MOVED to target while target,
// still importing, sends MOVED back. It fails the test on an error.
func (c *Cluster) SetSlotNode(slot int, target, source *Server) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	order := []*Server{target, source}
	for _, n := range c.Primaries() {
		if n != target && n != source {
			order = append(order, n)
		}
	}
	id := c.ID(target)
	for _, n := range order {
		if err := n.Client().Do(ctx, "cluster", "setslot", slot, "node", id).Err(); err != nil {
			c.t.Fatalf("redistest: node %s: CLUSTER SETSLOT %d NODE %s: %v", n.Addr(), slot, target.Addr(), err)
		}
	}
}

// ReplicasOf returns the running nodes that replicate primary.
func (c *Cluster) ReplicasOf(primary *Server) []*Server {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	id := c.ID(primary)
	var out []*Server
	for _, s := range c.live() {
		if s == primary {
			continue
		}
		nodes, err := s.Client().ClusterNodes(ctx).Result()
		if err != nil {
			c.t.Fatalf("redistest: node %s: CLUSTER NODES: %v", s.Addr(), err)
		}
		for line := range strings.Lines(nodes) {
			f := strings.Fields(line)
			if len(f) > 3 && strings.Contains(f[2], "myself") && f[3] == id {
				out = append(out, s)
			}
		}
	}
	return out
}
