package send

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tech-log/tech-log-backend/shared-contract/keyspace"
)

// Cluster routing bounds.
const (
	// minRefreshInterval spaces slot-map reloads triggered by failures.
	minRefreshInterval = 100 * time.Millisecond
)

// ClusterRouter maps slots to primaries itself and sends each program call
// to one node client: go-redis's cluster loop, which re-sends after EOF and
// timeouts, never carries a program. Node clients come from the
// ClusterClient's NewClient hook, which internal/redisclient's
// NewClusterClient sets (and the provider's option check requires), so
// each is built from the same option set as every other client, at the
// node's address.
type ClusterRouter struct {
	cc        *redis.ClusterClient
	newClient func(*redis.Options) *redis.Client
	seeds     []string
	timeout   time.Duration
	now       func() time.Time
	// qualify runs the version check and script warm-up on a node.
	qualify func(ctx context.Context, c Commander) error

	mu     sync.Mutex
	nodes  map[string]*Target
	count  int // targets met: the next index
	closed bool

	slots       [keyspace.ClusterSlots]atomic.Pointer[Target]
	loaded      atomic.Bool
	stale       atomic.Bool
	refreshMu   sync.Mutex
	lastRefresh atomic.Int64 // unix nanos
}

func NewClusterRouter(cc *redis.ClusterClient, timeout time.Duration, now func() time.Time) *ClusterRouter {
	o := cc.Options()
	return &ClusterRouter{
		cc: cc, newClient: o.NewClient, seeds: append([]string(nil), o.Addrs...),
		timeout: timeout, now: now, nodes: map[string]*Target{},
	}
}

// node returns the client of addr, creating it on first use.
func (r *ClusterRouter) node(addr string) (*Target, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, redis.ErrClosed
	}
	n := r.nodes[addr]
	if n == nil {
		n = newTarget(r.count, addr, r.newClient(&redis.Options{Addr: addr}))
		r.count++
		r.nodes[addr] = n
	}
	return n, nil
}

// Process sends an administrative command (never a program) to the first
// node that answers: the primaries of the slot map, then the seeds.
func (r *ClusterRouter) Process(ctx context.Context, cmd redis.Cmder) error {
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
func (r *ClusterRouter) candidates() []string {
	seen := map[string]bool{}
	var out []string
	for _, n := range r.Primaries() {
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

// Primaries returns the distinct nodes of the slot map.
func (r *ClusterRouter) Primaries() []*Target {
	seen := map[*Target]bool{}
	var out []*Target
	for i := range r.slots {
		if n := r.slots[i].Load(); n != nil && !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out
}

// Refresh reloads the slot map with CLUSTER SLOTS from the first node that
// answers (known primaries, then seeds). A read-only administrative
// command: asking another node after a failure re-sends no program.
func (r *ClusterRouter) Refresh(ctx context.Context) error {
	r.refreshMu.Lock()
	defer r.refreshMu.Unlock()
	var lastErr error
	for _, addr := range r.candidates() {
		n, err := r.node(addr)
		if err != nil {
			return err
		}
		cctx, cancel := context.WithTimeout(ctx, r.timeout)
		// CLUSTER SLOTS (CLUSTER SHARDS needs Redis 7; CLUSTER SLOTS
		// answers on every supported version).
		cmd := redis.NewClusterSlotsCmd(cctx, "cluster", "slots")
		_ = n.client.Process(cctx, cmd)
		slots, err := cmd.Result()
		cancel()
		if err != nil {
			lastErr = fmt.Errorf("CLUSTER SLOTS on %s: %w", addr, err)
			continue
		}
		var table [keyspace.ClusterSlots]*Target
		bad := false
		for _, s := range slots {
			if len(s.Nodes) == 0 || s.Start < 0 || s.End >= keyspace.ClusterSlots || s.Start > s.End {
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
func (r *ClusterRouter) primaryFor(ctx context.Context, key string) (*Target, error) {
	if !r.loaded.Load() {
		if err := r.Refresh(ctx); err != nil {
			return nil, err
		}
	} else if r.stale.Load() && r.now().UnixNano()-r.lastRefresh.Load() >= int64(minRefreshInterval) && r.refreshMu.TryLock() {
		r.refreshMu.Unlock()
		_ = r.Refresh(ctx) // a failed reload keeps the old map
	}
	n := r.slots[keySlot(key)].Load()
	if n == nil {
		return nil, ErrClusterSlotUnserved
	}
	return n, nil
}

// Ensure qualifies n once: version check and script warm-up before the
// first program call it receives.
func (r *ClusterRouter) Ensure(ctx context.Context, n *Target) error {
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
func (r *ClusterRouter) Close() error {
	r.mu.Lock()
	r.closed = true
	nodes := r.nodes
	r.nodes = map[string]*Target{}
	r.mu.Unlock()
	var errs []error
	for _, n := range nodes {
		if err := n.client.(io.Closer).Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := r.cc.Close(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// keySlot is the Redis Cluster slot of key (keyspace.Slot).
func keySlot(key string) int { return keyspace.Slot(key) }

// SetQualify sets the qualification run on a primary before its first
// program call (and by Ensure): version check, script warm-up, server
// checks. An error that refuses the server for what it answered should
// wrap ErrQualificationRefused.
func (r *ClusterRouter) SetQualify(f func(ctx context.Context, c Commander) error) { r.qualify = f }

// Requalify forgets that t passed qualification and qualifies it again.
func (r *ClusterRouter) Requalify(ctx context.Context, t *Target) error {
	t.qualified.Store(false)
	return r.Ensure(ctx, t)
}

// NeedsRefresh reports whether the slot map was never loaded or a failure
// marked it stale.
func (r *ClusterRouter) NeedsRefresh() bool { return !r.loaded.Load() || r.stale.Load() }

// UnservedSlot returns a slot no primary serves in the slot map, and false
// when every slot is served.
func (r *ClusterRouter) UnservedSlot() (int, bool) {
	for i := range r.slots {
		if r.slots[i].Load() == nil {
			return i, true
		}
	}
	return 0, false
}

// SlotOwner is the primary the slot map gives slot (nil: none, or out of
// range).
func (r *ClusterRouter) SlotOwner(slot int) *Target {
	if slot < 0 || slot >= keyspace.ClusterSlots {
		return nil
	}
	return r.slots[slot].Load()
}
