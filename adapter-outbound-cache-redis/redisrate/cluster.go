package redisrate

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tech-log/tech-log-backend/shared-contract/keyspace"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/internal/certainty"
)

// Cluster routing bounds.
const (
	// clusterSlots is the number of Redis Cluster hash slots.
	clusterSlots = 16384
	// MaxClusterHops bounds the refusals one program call follows: MOVED,
	// ASK, TRYAGAIN and CLUSTERDOWN replies (each sent before anything
	// ran), and the NOSCRIPT that leads to the one EVAL.
	MaxClusterHops = 5
	// clusterRetryPause is the pause before a program call is sent again
	// after TRYAGAIN or CLUSTERDOWN.
	clusterRetryPause = 25 * time.Millisecond
	// minRefreshInterval spaces slot-map reloads triggered by failures.
	minRefreshInterval = 100 * time.Millisecond
)

// ErrClusterSlotUnserved: the slot map has no primary for the key's slot.
var ErrClusterSlotUnserved = errors.New("no cluster node serves the key's slot")

// clusterNode is one node's client and whether it passed qualification
// (version check and script warm-up) since the router first met it.
type clusterNode struct {
	addr      string
	client    *redis.Client
	mu        sync.Mutex // serializes qualification
	qualified atomic.Bool
	// batch batches first attempts to this node when batching is on.
	batchOnce sync.Once
	batch     atomic.Pointer[batcher]
}

// clusterRouter maps slots to primaries itself and sends each program call
// to one node client: go-redis's cluster loop, which re-sends after EOF and
// timeouts, never carries a program. Node clients come from the
// ClusterClient's NewClient hook, so they have NewClient's fixed options.
type clusterRouter struct {
	cc        *redis.ClusterClient
	newClient func(*redis.Options) *redis.Client
	seeds     []string
	timeout   time.Duration
	now       func() time.Time
	// qualify runs the version check and script warm-up on a node.
	qualify func(ctx context.Context, c commander) error

	mu     sync.Mutex
	nodes  map[string]*clusterNode
	closed bool

	slots       [clusterSlots]atomic.Pointer[clusterNode]
	loaded      atomic.Bool
	stale       atomic.Bool
	refreshMu   sync.Mutex
	lastRefresh atomic.Int64 // unix nanos
}

func newClusterRouter(cc *redis.ClusterClient, timeout time.Duration, now func() time.Time) *clusterRouter {
	o := cc.Options()
	return &clusterRouter{
		cc: cc, newClient: o.NewClient, seeds: append([]string(nil), o.Addrs...),
		timeout: timeout, now: now, nodes: map[string]*clusterNode{},
	}
}

// node returns the client of addr, creating it on first use.
func (r *clusterRouter) node(addr string) (*clusterNode, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, redis.ErrClosed
	}
	n := r.nodes[addr]
	if n == nil {
		n = &clusterNode{addr: addr, client: r.newClient(&redis.Options{Addr: addr})}
		r.nodes[addr] = n
	}
	return n, nil
}

// Process sends an administrative command (never a program) to the first
// node that answers: the primaries of the slot map, then the seeds.
func (r *clusterRouter) Process(ctx context.Context, cmd redis.Cmder) error {
	var err error
	for _, addr := range r.candidates() {
		n, nerr := r.node(addr)
		if nerr != nil {
			return nerr
		}
		if err = n.client.Process(ctx, cmd); err == nil {
			return nil
		}
	}
	return err
}

// candidates returns the slot map's primaries, then the seeds, distinct.
func (r *clusterRouter) candidates() []string {
	seen := map[string]bool{}
	var out []string
	for _, n := range r.primaries() {
		if !seen[n.addr] {
			seen[n.addr] = true
			out = append(out, n.addr)
		}
	}
	for _, a := range r.seeds {
		if !seen[a] {
			seen[a] = true
			out = append(out, a)
		}
	}
	return out
}

// primaries returns the distinct nodes of the slot map.
func (r *clusterRouter) primaries() []*clusterNode {
	seen := map[*clusterNode]bool{}
	var out []*clusterNode
	for i := range r.slots {
		if n := r.slots[i].Load(); n != nil && !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out
}

// refresh reloads the slot map with CLUSTER SLOTS from the first node that
// answers (known primaries, then seeds). A read-only administrative
// command: asking another node after a failure re-sends no program.
func (r *clusterRouter) refresh(ctx context.Context) error {
	r.refreshMu.Lock()
	defer r.refreshMu.Unlock()
	var lastErr error
	for _, addr := range r.candidates() {
		n, err := r.node(addr)
		if err != nil {
			return err
		}
		cctx, cancel := context.WithTimeout(ctx, r.timeout)
		slots, err := n.client.ClusterSlots(cctx).Result() //nolint:staticcheck // SA1019: CLUSTER SHARDS needs Redis 7; CLUSTER SLOTS answers on every supported version
		cancel()
		if err != nil {
			lastErr = fmt.Errorf("CLUSTER SLOTS on %s: %w", addr, err)
			continue
		}
		var table [clusterSlots]*clusterNode
		bad := false
		for _, s := range slots {
			if len(s.Nodes) == 0 || s.Start < 0 || s.End >= clusterSlots || s.Start > s.End {
				lastErr = fmt.Errorf("CLUSTER SLOTS on %s: malformed range %d-%d", addr, s.Start, s.End)
				bad = true
				break
			}
			p, err := r.node(s.Nodes[0].Addr)
			if err != nil {
				return err
			}
			for i := s.Start; i <= s.End; i++ {
				table[i] = p
			}
		}
		if bad {
			continue
		}
		for i := range table {
			r.slots[i].Store(table[i])
		}
		r.loaded.Store(true)
		r.stale.Store(false)
		r.lastRefresh.Store(r.now().UnixNano())
		return nil
	}
	if lastErr == nil {
		lastErr = errors.New("no seed address")
	}
	return fmt.Errorf("redisrate: cluster slot map: %w", lastErr)
}

// primaryFor returns the node serving key's slot, loading the slot map
// first if it was never loaded or a failure marked it stale (at most one
// reload per minRefreshInterval; a reload in progress is not waited for).
func (r *clusterRouter) primaryFor(ctx context.Context, key string) (*clusterNode, error) {
	if !r.loaded.Load() {
		if err := r.refresh(ctx); err != nil {
			return nil, err
		}
	} else if r.stale.Load() && r.now().UnixNano()-r.lastRefresh.Load() >= int64(minRefreshInterval) && r.refreshMu.TryLock() {
		r.refreshMu.Unlock()
		_ = r.refresh(ctx) // a failed reload keeps the old map
	}
	n := r.slots[keySlot(key)].Load()
	if n == nil {
		return nil, ErrClusterSlotUnserved
	}
	return n, nil
}

// ensure qualifies n once: version check and script warm-up before the
// first program call it receives.
func (r *clusterRouter) ensure(ctx context.Context, n *clusterNode) error {
	if n.qualified.Load() {
		return nil
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.qualified.Load() {
		return nil
	}
	if err := r.qualify(ctx, n.client); err != nil {
		return fmt.Errorf("redisrate: cluster node %s: %w", n.addr, err)
	}
	n.qualified.Store(true)
	return nil
}

// close closes every node client and the ClusterClient.
func (r *clusterRouter) Close() error {
	r.mu.Lock()
	r.closed = true
	nodes := r.nodes
	r.nodes = map[string]*clusterNode{}
	r.mu.Unlock()
	var errs []error
	for _, n := range nodes {
		if err := n.client.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := r.cc.Close(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// runCluster is run for a cluster: it sends the program to the slot's
// primary and follows MOVED, ASK (with ASKING pipelined on the same
// connection), TRYAGAIN and CLUSTERDOWN, each a refusal before anything
// ran, and NOSCRIPT with the one EVAL, at most MaxClusterHops times and
// never after sendBy. Any other failure ends the call: a command that may
// have run is never sent again.
func (x *executor) runCluster(ctx context.Context, c *call, s *script, argv []any, sendBy time.Time) result {
	r := x.router
	node, err := r.primaryFor(ctx, c.key)
	if err != nil {
		return result{err: err, command: cmdEvalSha}
	}
	command, program, text := cmdEvalSha, s.sha, s.shaHex
	fellBack, asking := false, false
	for hop := 0; ; hop++ {
		if err := r.ensure(ctx, node); err != nil {
			return result{err: err, command: command, fellBack: fellBack}
		}
		var res result
		if hop == 0 && x.maxBatch > 1 {
			// First attempts batch per node; redirects and the EVAL
			// fallback go alone.
			res = x.nodeBatcher(node).do(ctx, c, batchReq{s: s, argv: argv, sendBy: sendBy})
			if res.expired {
				return res
			}
		} else {
			res = x.send(ctx, node.client, c, command, program, text, argv, asking)
		}
		res.fellBack = fellBack
		if res.err == nil {
			return res
		}
		if !res.written {
			r.stale.Store(true)
			return res
		}
		refusal, addr := certainty.Follow(res.err)
		if refusal == certainty.RefusalNoScript && fellBack {
			refusal = certainty.RefusalNone // NOSCRIPT after EVAL: not followed again
		}
		if refusal == certainty.RefusalNone {
			if !certainty.IsServerReply(res.err) {
				r.stale.Store(true) // the connection failed: the map may be old
			}
			return res
		}
		if refusal == certainty.RefusalNoScript && x.now().After(sendBy) {
			res.fallbackTooLate = true
			return res
		}
		if hop+1 >= MaxClusterHops || x.now().After(sendBy) {
			return res // a refusal: nothing ran
		}
		if refusal == certainty.RefusalNoScript {
			command, program, text, fellBack = cmdEval, s.source, s.name, true
			continue
		}
		switch refusal {
		case certainty.RefusalMoved:
			if node, err = r.node(addr); err != nil {
				return result{err: err, command: command, fellBack: fellBack}
			}
			r.slots[keySlot(c.key)].Store(node)
			r.stale.Store(true) // other slots may have moved too
			asking = false
		case certainty.RefusalAsk:
			if node, err = r.node(addr); err != nil {
				return result{err: err, command: command, fellBack: fellBack}
			}
			asking = true
		case certainty.RefusalTryAgain, certainty.RefusalClusterDown:
			t := time.NewTimer(clusterRetryPause)
			select {
			case <-ctx.Done():
				t.Stop()
				return res
			case <-t.C:
			}
			if refusal == certainty.RefusalClusterDown {
				_ = r.refresh(ctx)
				if node, err = r.primaryFor(ctx, c.key); err != nil {
					return res
				}
				asking = false
			}
		}
	}
}

// nodeBatcher returns n's batcher, creating it on first use.
func (x *executor) nodeBatcher(n *clusterNode) *batcher {
	if b := n.batch.Load(); b != nil {
		return b
	}
	n.batchOnce.Do(func() { n.batch.Store(newBatcher(x, n.client, x.slots, x.maxBatch)) })
	return n.batch.Load()
}

// keySlot is the Redis Cluster slot of key (keyspace.Slot).
func keySlot(key string) int { return keyspace.Slot(key) }
