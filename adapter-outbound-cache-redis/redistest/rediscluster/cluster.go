package rediscluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redisinfo"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest/redisserver"
	"github.com/tech-log/tech-log-backend/shared-contract/keyspace"
)

// PollInterval is the pause between two checks of a wait.
const PollInterval = 50 * time.Millisecond

// SlotMap maps every hash slot to its primary's address ("" when unserved).
type SlotMap [keyspace.ClusterSlots]string

// Join makes nodes (admin clients of running cluster-enabled servers that
// know no other node) one cluster: a distinct config epoch per node, CLUSTER
// MEET from the first node to every other on the bus port each reports
// (CONFIG GET cluster-port), an even share of the slots to each of the
// first primaries nodes, then the others as replicas: node
// primaries + p*r + i (r replicas per primary) replicates primary p. It
// returns the nodes' ids in node order. ctx bounds the whole join; it does
// not wait for the cluster to settle (WaitHealthy).
func Join(ctx context.Context, nodes []*redis.Client, primaries int) ([]string, error) {
	if primaries < 1 || len(nodes) < primaries || (len(nodes)-primaries)%primaries != 0 {
		return nil, fmt.Errorf("rediscluster: %d nodes, %d primaries: want primaries >= 1 and the other nodes an equal number of replicas per primary", len(nodes), primaries)
	}
	replicas := (len(nodes) - primaries) / primaries
	ids := make([]string, len(nodes))
	busPorts := make([]string, len(nodes))
	for i, c := range nodes {
		addr := c.Options().Addr
		bus, err := c.ConfigGet(ctx, "cluster-port").Result()
		if err != nil {
			return nil, fmt.Errorf("rediscluster: node %s: CONFIG GET cluster-port: %w", addr, err)
		}
		if busPorts[i] = bus["cluster-port"]; busPorts[i] == "" {
			return nil, fmt.Errorf("rediscluster: node %s: CONFIG GET cluster-port: no value", addr)
		}
		if ids[i], err = c.Do(ctx, "cluster", "myid").Text(); err != nil {
			return nil, fmt.Errorf("rediscluster: node %s: CLUSTER MYID: %w", addr, err)
		}
		if err := c.Do(ctx, "cluster", "set-config-epoch", i+1).Err(); err != nil {
			return nil, fmt.Errorf("rediscluster: node %s: CLUSTER SET-CONFIG-EPOCH: %w", addr, err)
		}
	}
	for i, c := range nodes[1:] {
		host, port, err := net.SplitHostPort(c.Options().Addr)
		if err != nil {
			return nil, fmt.Errorf("rediscluster: node address %q: %w", c.Options().Addr, err)
		}
		if err := nodes[0].Do(ctx, "cluster", "meet", host, port, busPorts[i+1]).Err(); err != nil {
			return nil, fmt.Errorf("rediscluster: CLUSTER MEET %s: %w", c.Options().Addr, err)
		}
	}
	for i := range primaries {
		lo, hi := i*keyspace.ClusterSlots/primaries, (i+1)*keyspace.ClusterSlots/primaries-1
		if err := nodes[i].Do(ctx, "cluster", "addslotsrange", lo, hi).Err(); err != nil {
			return nil, fmt.Errorf("rediscluster: node %s: CLUSTER ADDSLOTSRANGE %d %d: %w", nodes[i].Options().Addr, lo, hi, err)
		}
	}
	// A replica can follow a primary once gossip has told it the
	// primary's id; retry until then.
	for r := range replicas {
		for p := range primaries {
			c := nodes[primaries+p*replicas+r]
			err := redisserver.Poll(ctx, PollInterval, func() error {
				return c.Do(ctx, "cluster", "replicate", ids[p]).Err()
			})
			if err != nil {
				return nil, fmt.Errorf("rediscluster: node %s: CLUSTER REPLICATE %s: %w", c.Options().Addr, nodes[p].Options().Addr, err)
			}
		}
	}
	return ids, nil
}

// WaitHealthy polls Healthy until it holds or ctx ends (the error then
// names what did not hold last).
func WaitHealthy(ctx context.Context, nodes []*redis.Client) error {
	return redisserver.Poll(ctx, PollInterval, func() error { return Healthy(ctx, nodes) })
}

// Healthy returns nil when every node (the running nodes of a cluster)
// reports cluster_state ok with every slot ok and none failing, all agree
// on each slot's primary and that primary is one of nodes, and every
// replica's link to its primary is up; else an error naming the first
// node and condition that did not hold.
func Healthy(ctx context.Context, nodes []*redis.Client) error {
	if len(nodes) == 0 {
		return errors.New("rediscluster: no node")
	}
	known := make(map[string]bool, len(nodes))
	for _, c := range nodes {
		known[c.Options().Addr] = true
	}
	var want SlotMap
	for i, c := range nodes {
		addr := c.Options().Addr
		text, err := c.ClusterInfo(ctx).Result()
		if err != nil {
			return fmt.Errorf("node %s: CLUSTER INFO: %w", addr, err)
		}
		ci, err := redisinfo.ParseClusterInfo(text)
		if err != nil {
			return fmt.Errorf("node %s: CLUSTER INFO: %w", addr, err)
		}
		if ci.State != redisinfo.ClusterStateOK || ci.SlotsOK != keyspace.ClusterSlots || ci.SlotsPFail != 0 || ci.SlotsFail != 0 {
			return fmt.Errorf("node %s: CLUSTER INFO: state %s, slots ok %d of %d, pfail %d, fail %d",
				addr, ci.State, ci.SlotsOK, keyspace.ClusterSlots, ci.SlotsPFail, ci.SlotsFail)
		}
		got, err := SlotOwners(ctx, c)
		if err != nil {
			return err
		}
		if i == 0 {
			want = got
			for slot, owner := range want {
				if !known[owner] {
					return fmt.Errorf("slot %d served by %q, not one of the nodes", slot, owner)
				}
			}
		} else if got != want {
			return fmt.Errorf("nodes %s and %s disagree on the slot map", nodes[0].Options().Addr, addr)
		}
		repl, err := Replication(ctx, c)
		if err != nil {
			return err
		}
		if repl.Role != redisinfo.RolePrimary && !repl.LinkUp {
			return fmt.Errorf("replica %s: link to its primary not up", addr)
		}
	}
	return nil
}

// SlotOwners returns the slot map as node sees it (CLUSTER SLOTS: every
// supported Redis version answers it; CLUSTER SHARDS needs 7).
func SlotOwners(ctx context.Context, node *redis.Client) (SlotMap, error) {
	var owners SlotMap
	addr := node.Options().Addr
	slots, err := node.ClusterSlots(ctx).Result() //nolint:staticcheck // SA1019: CLUSTER SHARDS needs Redis 7; CLUSTER SLOTS answers on every supported version
	if err != nil {
		return owners, fmt.Errorf("node %s: CLUSTER SLOTS: %w", addr, err)
	}
	for _, r := range slots {
		if len(r.Nodes) == 0 || r.Start < 0 || r.End >= keyspace.ClusterSlots || r.Start > r.End {
			return owners, fmt.Errorf("node %s: CLUSTER SLOTS: bad range %+v", addr, r)
		}
		for slot := r.Start; slot <= r.End; slot++ {
			owners[slot] = r.Nodes[0].Addr
		}
	}
	return owners, nil
}

// Replication runs INFO replication on c and reads it (redisinfo).
func Replication(ctx context.Context, c *redis.Client) (redisinfo.Replication, error) {
	text, err := c.Info(ctx, "replication").Result()
	if err != nil {
		return redisinfo.Replication{}, fmt.Errorf("node %s: INFO replication: %w", c.Options().Addr, err)
	}
	r, err := redisinfo.ParseReplication(text)
	if err != nil {
		return r, fmt.Errorf("node %s: INFO replication: %w", c.Options().Addr, err)
	}
	return r, nil
}
