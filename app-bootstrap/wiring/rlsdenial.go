package wiring

import (
	"sync"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/ratedenial"
	"github.com/tech-log/tech-log-backend/app-bootstrap/metrics"
)

// generationCaches sums the denial caches of the RLS's rule generations
// for metrics.RegisterRLSDenialCache: the counters of every generation,
// closed ones included, so they never go down at a reload; the gauges of
// the newest generation that is still open.
type generationCaches struct {
	mu      sync.Mutex
	open    []*ratedenial.Cache // oldest first
	retired metrics.DenialCacheStats
}

// add counts c, the cache of a new generation.
func (g *generationCaches) add(c *ratedenial.Cache) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.open = append(g.open, c)
}

// retire keeps c's counters as they are when its generation closes.
func (g *generationCaches) retire(c *ratedenial.Cache) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for i, o := range g.open {
		if o == c {
			st := c.Stats()
			g.retired.Hits += st.Hits
			g.retired.Invalidations += st.Invalidations
			g.retired.Evicted += st.Evicted
			g.open = append(g.open[:i], g.open[i+1:]...)
			return
		}
	}
}

// stats is what a scrape reads.
func (g *generationCaches) stats() metrics.DenialCacheStats {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := metrics.DenialCacheStats{Hits: g.retired.Hits, Invalidations: g.retired.Invalidations, Evicted: g.retired.Evicted}
	for _, c := range g.open {
		st := c.Stats()
		out.Hits += st.Hits
		out.Invalidations += st.Invalidations
		out.Evicted += st.Evicted
		out.Entries, out.MaxEntries, out.Live = st.Entries, st.MaxEntries, st.Live
	}
	return out
}
