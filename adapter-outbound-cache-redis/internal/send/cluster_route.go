package send

import (
	"context"
	"slices"
	"strconv"
	"strings"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/internal/certainty"
	"github.com/tech-log/tech-log-backend/shared-contract/keyspace"
)

// targetFor returns the primary serving key's slot, loading the slot map
// first if it was never loaded or a failure marked it stale (primaryFor).
func (r *ClusterRouter) targetFor(ctx context.Context, key string) (*Target, error) {
	return r.primaryFor(ctx, key)
}

// follows: a cluster route follows every refusal.
func (r *ClusterRouter) follows(certainty.Refusal) bool { return true }

// moved records that key's slot lives at addr, marks the map stale (other
// slots may have moved too) and returns addr's target.
func (r *ClusterRouter) moved(key, addr string) (*Target, error) {
	t, err := r.node(addr)
	if err != nil {
		return nil, err
	}
	r.slots[keySlot(key)].Store(t)
	r.stale.Store(true)
	return t, nil
}

// Target returns addr's target (an ASK redirect).
func (r *ClusterRouter) target(addr string) (*Target, error) { return r.node(addr) }

// reload reloads the slot map and returns key's primary.
func (r *ClusterRouter) reload(ctx context.Context, key string) (*Target, error) {
	_ = r.Refresh(ctx)
	return r.primaryFor(ctx, key)
}

// lost marks the slot map stale: a call ended without a reply, so the
// primary may be gone.
func (r *ClusterRouter) lost(Sent) { r.stale.Store(true) }

// targets returns the primaries of the slot map, in index order.
func (r *ClusterRouter) targets() []*Target {
	out := r.Primaries()
	slices.SortFunc(out, func(a, b *Target) int { return a.index - b.index })
	return out
}

// met returns every node the router has met (the slot map's primaries,
// and any node met before or since).
func (r *ClusterRouter) met() []*Target {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*Target, 0, len(r.nodes))
	for _, t := range r.nodes {
		out = append(out, t)
	}
	return out
}

// slotsOf is the slot ranges the slot map gives t, e.g. "0-5460,10923".
func (r *ClusterRouter) slotsOf(t *Target) string {
	var b strings.Builder
	start := -1
	for i := 0; i <= keyspace.ClusterSlots; i++ {
		in := i < keyspace.ClusterSlots && r.slots[i].Load() == t
		switch {
		case in && start < 0:
			start = i
		case !in && start >= 0:
			if b.Len() > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.Itoa(start))
			if i-1 > start {
				b.WriteString("-" + strconv.Itoa(i-1))
			}
			start = -1
		}
	}
	return b.String()
}
