package redisrate

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// TestClusterQueueSlots: the queue (10/s, queueSize 20, delayAfter
// 0; ADR 0028) on Redis Cluster, 100 requests of one subject at once from
// two providers. What must hold: at least 21 admitted (the queue fills) and
// at most one more per 100 ms the decisions took; the admissions' slots,
// ServerNow + Delay on the server's clock, are 100 ms apart (the i-th no
// sooner than i slots after the first, to the millisecond the delay is
// rounded up to); no delay exceeds the queue's longest, 2 s; every other
// request is denied with a retry-after. Refunding the last admission gives
// its slot to the next request.
func TestClusterQueueSlots(t *testing.T) {
	c := redistest.StartCluster(t)
	keys := randomKeys(t)
	queue := mustPolicy(t, ratelimit.PolicySpec{ID: "queue", Params: ratelimit.LeakyBucket{Rate: 10, Period: time.Second, QueueSize: 20, MaxDelay: 2 * time.Second}})
	pols := []ratelimit.Policy{queue}
	var ps []*Provider
	for range 2 {
		ps = append(ps, clusterProvider(t, c.Addrs(), keys, pols, func(c *ClientConfig) {
			c.PoolSize = 64
			c.CommandTimeout, c.DialTimeout, c.PoolTimeout = noFaultTimeout, noFaultTimeout, noFaultTimeout
		}))
	}
	s := randomSubject(t)
	outs := make([]ratelimit.Outcome, 100)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range outs {
		wg.Go(func() {
			<-start
			outs[i] = ask(ps[i%2], "queue", s, 1)
		})
	}
	began := time.Now()
	close(start)
	wg.Wait()
	took := time.Since(began)

	var slots []time.Time
	for i, out := range outs {
		ev, ok := out.(ratelimit.Evaluated)
		require.True(t, ok, "request %d: no fault is injected: %v", i, out)
		d := ev.Decision
		if !d.Allowed {
			assert.Positive(t, d.RetryAfter, "request %d: a full queue says when it has room", i)
			assert.Zero(t, d.Delay, "request %d", i)
			continue
		}
		assert.LessOrEqual(t, d.Delay, 2*time.Second, "request %d: no delay beyond the queue's longest", i)
		assert.False(t, d.Receipt.IsZero(), "request %d: an admission can be given back", i)
		slots = append(slots, d.ServerNow.Add(d.Delay))
	}
	require.GreaterOrEqual(t, len(slots), 21, "the queue fills: one at once and 20 waiting")
	require.LessOrEqual(t, len(slots), 21+int(took/(100*time.Millisecond))+1, "at most one more per 100 ms the decisions took (%v)", took)
	slices.SortFunc(slots, func(a, b time.Time) int { return a.Compare(b) })
	for i := range slots {
		assert.False(t, slots[i].Before(slots[0].Add(time.Duration(i)*100*time.Millisecond-time.Millisecond)),
			"slot %d is %v after the first, before %v", i, slots[i].Sub(slots[0]), time.Duration(i)*100*time.Millisecond)
	}

	// The last admission given back: its whole slot comes back (the queue
	// is still 2 s long, so the refund is not cut at now), and the next
	// request is admitted into it.
	var last ratelimit.Decision
	for _, out := range outs {
		if d := out.(ratelimit.Evaluated).Decision; d.Allowed && d.Delay >= last.Delay {
			last = d
		}
	}
	back := ps[0].Refund(t.Context(), ratelimit.Request{PolicyID: "queue", SubjectDigest: s, Cost: 1, Deadline: time.Now().Add(3 * noFaultTimeout)}, last.Receipt)
	require.Equal(t, ratelimit.KindEvaluated, back.Kind(), "%v", back)
	assert.Equal(t, int64(1), back.(ratelimit.Evaluated).Decision.Refunded, "the slot is given back")
	next := ask(ps[1], "queue", s, 1)
	require.True(t, ratelimit.Admitted(next), "the refunded slot is taken: %v", next)
}
