package redisrate

import (
	"context"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// heldSlot is one slot of a concurrency limit as the history records it:
// the instance, and the local instants between which its handler
// certainly ran (from the acquire's answer to the release being sent,
// cut at the hold's end, ratelimit.HoldEnd, where the edge ends the
// handler's context).
type heldSlot struct {
	instance int
	from, to time.Time
}

// slotHistory records held slots; safe for concurrent use.
type slotHistory struct {
	mu  sync.Mutex
	all []heldSlot
}

func (h *slotHistory) record(s heldSlot) {
	if !s.to.After(s.from) {
		return // never certainly held
	}
	h.mu.Lock()
	h.all = append(h.all, s)
	h.mu.Unlock()
}

// earliest is the earlier of a and b.
func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// overHeld is the history checker of a concurrency limit (issue 37 item
// 4): the largest number of slots certainly held at one instant, and the
// instant, when it exceeds limit. Each slot counts only between its
// instants, and at an instant where one slot ends and another starts the
// end is taken first, so a reported excess is certain.
func overHeld(all []heldSlot, limit int) (int, time.Time, bool) {
	type event struct {
		at    time.Time
		delta int
	}
	events := make([]event, 0, 2*len(all))
	for _, s := range all {
		events = append(events, event{s.from, 1}, event{s.to, -1})
	}
	slices.SortFunc(events, func(a, b event) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return a.delta - b.delta // ends first
	})
	held, most := 0, 0
	var at time.Time
	for _, e := range events {
		held += e.delta
		if held > most {
			most, at = held, e.at
		}
	}
	return most, at, most > limit
}

// slotWorkload runs instances workers against a concurrency limit of
// limit slots held at most maxHold on one Redis (the third instance
// through a proxy), each worker taking a slot, holding it for a random
// time of at most hold and giving it back, for the run's length. During
// the run the first instance is killed while it holds slots (its handlers
// end, nothing is given back), the third is cut off from Redis for 800 ms
// and Redis is restarted (its append-only file written at every command).
// clientHold is how long a worker believes its slot is its own (maxHold
// for the shipped build). It returns the history and how many slots the
// killed instance held when it died.
func slotWorkload(t *testing.T, limit int64, maxHold, clientHold, hold time.Duration) ([]heldSlot, int64) {
	t.Helper()
	srv := redistest.Start(t, redistest.WithConfig("appendonly", "yes"), redistest.WithConfig("appendfsync", "always"))
	ownServer(t, srv)
	keys := randomKeys(t)
	pol := mustPolicy(t, ratelimit.PolicySpec{ID: "slots", Params: ratelimit.Concurrency{Limit: limit, MaxHold: maxHold}})
	pols := []ratelimit.Policy{pol}
	proxy := redistest.StartProxy(t, srv.Addr())
	providers := []*Provider{
		serviceProvider(t, srv, keys, pols, nil),
		serviceProvider(t, srv, keys, pols, nil),
		serviceProvider(t, srv, keys, pols, func(c *ClientConfig) { c.Addr = proxy.Addr() }),
	}
	subject := randomSubject(t)
	var h slotHistory
	var killed atomic.Bool
	var killedAt time.Time // written before killed is set, read after
	var heldAtKill atomic.Int64
	start := time.Now()
	end := start.Add(4 * time.Second)
	var wg sync.WaitGroup
	for inst, p := range providers {
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 10_000 && time.Now().Before(end); i++ {
					if inst == 0 && killed.Load() {
						return
					}
					sent := time.Now()
					req := ratelimit.Request{PolicyID: pol.ID(), SubjectDigest: subject, Cost: 1, Deadline: sent.Add(2 * serviceTimeout)}
					out := p.Evaluate(context.Background(), req)
					got := time.Now()
					ev, ok := out.(ratelimit.Evaluated)
					if !ok || !ev.Decision.Allowed {
						time.Sleep(time.Duration(rand.IntN(20)+1) * time.Millisecond)
						continue
					}
					time.Sleep(time.Duration(rand.Int64N(int64(hold))))
					done := earliest(time.Now(), ratelimit.HoldEnd(sent, clientHold))
					if inst == 0 && killed.Load() {
						// Died holding it: the handler ended at the kill,
						// and nothing gives the slot back.
						h.record(heldSlot{inst, got, earliest(done, killedAt)})
						heldAtKill.Add(1)
						return
					}
					h.record(heldSlot{inst, got, done})
					ratelimit.RefundDetached(context.Background(), p, req, ev.Decision.Receipt, time.Now(), 2*serviceTimeout)
				}
			}()
		}
	}
	time.Sleep(time.Until(start.Add(900 * time.Millisecond)))
	killedAt = time.Now()
	killed.Store(true)
	time.Sleep(time.Until(start.Add(1500 * time.Millisecond)))
	proxy.Refuse()
	time.Sleep(time.Until(start.Add(1900 * time.Millisecond)))
	srv.Restart()
	time.Sleep(time.Until(start.Add(2300 * time.Millisecond)))
	require.NoError(t, proxy.Accept())
	wg.Wait()
	return h.all, heldAtKill.Load()
}

// TestConcurrencyHistoryThroughFaults (issue 37 item 4, ADR 0041): across
// three instances, a kill while holding, a partition and a Redis restart,
// never more slots are certainly held at once than the limit.
func TestConcurrencyHistoryThroughFaults(t *testing.T) {
	const limit = 5
	maxHold := 2 * time.Second
	all, dead := slotWorkload(t, limit, maxHold, maxHold, 150*time.Millisecond)
	most, at, over := overHeld(all, limit)
	assert.False(t, over, "%d slots held at once at %v, limit %d", most, at, limit)
	perInstance := map[int]int{}
	for _, s := range all {
		perInstance[s.instance]++
	}
	t.Logf("%d holds checked (per instance %v), at most %d held at once; the killed instance died holding %d", len(all), perInstance, most, dead)
	require.Greater(t, len(all), 3*limit, "too few holds to show anything")
}

// TestConcurrencyHistoryCheckerFailsABrokenHold: the same workload where
// the server reclaims a slot (maxHold 100 ms) while its handler still
// runs (up to 600 ms): the checker must find more slots held than the
// limit, or it proves nothing.
func TestConcurrencyHistoryCheckerFailsABrokenHold(t *testing.T) {
	const limit = 5
	all, _ := slotWorkload(t, limit, 100*time.Millisecond, 600*time.Millisecond, 600*time.Millisecond)
	most, at, over := overHeld(all, limit)
	assert.True(t, over, "the checker did not see the broken build's excess (at most %d held)", most)
	t.Logf("broken build: %d slots held at once at %v, limit %d", most, at, limit)
}

// TestOverHeldCountsOnlyCertainOverlap: the checker's own arithmetic.
func TestOverHeldCountsOnlyCertainOverlap(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	touching := []heldSlot{{0, at(0), at(10)}, {1, at(10), at(20)}}
	most, _, over := overHeld(touching, 1)
	assert.Equal(t, 1, most, "a slot ending where another starts is not an overlap")
	assert.False(t, over)
	overlapping := []heldSlot{{0, at(0), at(10)}, {1, at(5), at(20)}, {2, at(6), at(7)}}
	most, when, over := overHeld(overlapping, 2)
	assert.Equal(t, 3, most)
	assert.True(t, over)
	assert.Equal(t, at(6), when)
	var h slotHistory
	h.record(heldSlot{0, at(5), at(5)})
	h.record(heldSlot{0, at(6), at(5)})
	assert.Empty(t, h.all, "a slot whose handler never certainly ran is not recorded")
}
