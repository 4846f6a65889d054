package redisrate

import (
	"context"
	"slices"
	"strconv"
	"strings"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/internal/certainty"
)

// targetFor returns the primary serving key's slot, loading the slot map
// first if it was never loaded or a failure marked it stale (primaryFor).
func (r *clusterRouter) targetFor(ctx context.Context, key string) (*target, error) {
	return r.primaryFor(ctx, key)
}

// follows: a cluster route follows every refusal.
func (r *clusterRouter) follows(certainty.Refusal) bool { return true }

// moved records that key's slot lives at addr, marks the map stale (other
// slots may have moved too) and returns addr's target.
func (r *clusterRouter) moved(key, addr string) (*target, error) {
	t, err := r.node(addr)
	if err != nil {
		return nil, err
	}
	r.slots[keySlot(key)].Store(t)
	r.stale.Store(true)
	return t, nil
}

// target returns addr's target (an ASK redirect).
func (r *clusterRouter) target(addr string) (*target, error) { return r.node(addr) }

// reload reloads the slot map and returns key's primary.
func (r *clusterRouter) reload(ctx context.Context, key string) (*target, error) {
	_ = r.refresh(ctx)
	return r.primaryFor(ctx, key)
}

// lost marks the slot map stale: a call ended without a reply, so the
// primary may be gone.
func (r *clusterRouter) lost(sent) { r.stale.Store(true) }

// targets returns the primaries of the slot map, in index order.
func (r *clusterRouter) targets() []*target {
	out := r.primaries()
	slices.SortFunc(out, func(a, b *target) int { return a.index - b.index })
	return out
}

// met returns every node the router has met (the slot map's primaries,
// and any node met before or since).
func (r *clusterRouter) met() []*target {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*target, 0, len(r.nodes))
	for _, t := range r.nodes {
		out = append(out, t)
	}
	return out
}

// slotsOf is the slot ranges the slot map gives t, e.g. "0-5460,10923".
func (r *clusterRouter) slotsOf(t *target) string {
	var b strings.Builder
	start := -1
	for i := 0; i <= clusterSlots; i++ {
		in := i < clusterSlots && r.slots[i].Load() == t
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
