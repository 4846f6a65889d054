package ratelease

import (
	"context"
	"math/rand/v2"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/internal/changetest"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// kill stops l as SIGKILL would: no more decisions, and no lease given
// back (Close, at cleanup, then does nothing).
func (l *Leaser) kill() { l.stopSweep() }

// unspent is the units l's leases hold unspent. The lock order is an
// entry, then the table: the table is copied first, as endLeases does.
func (l *Leaser) unspent() int64 {
	l.mu.Lock()
	entries := make([]*lease, 0, len(l.table))
	for _, e := range l.table {
		entries = append(entries, e)
	}
	l.mu.Unlock()
	var n int64
	for _, e := range entries {
		e.mu.Lock()
		n += e.left
		e.mu.Unlock()
	}
	return n
}

// TestKilledInstanceOnlyUnderAdmits (issue 37 item 4): three instances
// hammer a leased subject through one window; one is killed holding
// leases. The checker finds no window over the limit, and the window's
// admissions fall short of the limit by at most the killed instance's
// unspent units, which is at most one lease (maxShare of the limit): the
// documented bound (ADR 0042).
func TestKilledInstanceOnlyUnderAdmits(t *testing.T) {
	const limit = 400
	window := time.Second
	srv := redistest.Start(t)
	keys := redistest.RandomKeys(t)
	p := leasedPolicy(t, ratelimit.FixedWindow{Limit: limit, Window: window}, 0.25, 400*time.Millisecond)
	pols := []ratelimit.Policy{p}
	var leasers []*Leaser
	for range 3 {
		leasers = append(leasers, newLeaser(t, provider(t, srv, keys, pols), pols))
	}
	s := changetest.RandomSubject(t)
	var h history
	var mu sync.Mutex
	dead := false
	w := time.UnixMilli((time.Now().UnixMilli()/window.Milliseconds() + 1) * window.Milliseconds())
	time.Sleep(time.Until(w.Add(20 * time.Millisecond)))
	end := w.Add(window - 100*time.Millisecond)
	var wg sync.WaitGroup
	for inst, l := range leasers {
		for range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 2000 && time.Now().Before(end); i++ {
					mu.Lock()
					stop := inst == 0 && dead
					mu.Unlock()
					if stop {
						return
					}
					before := time.Now()
					if admitted(l.Evaluate(context.Background(), request(p, s))) {
						h.record(admission{inst, before, time.Now()})
					}
					time.Sleep(time.Millisecond) // a steady load, not a spin
				}
			}()
		}
	}
	// Kill instance 0 once it holds a lease with at least 10 units left.
	var lost int64
	for i := 0; i < 500 && time.Now().Before(w.Add(window/2)); i++ {
		if leasers[0].unspent() >= 10 {
			mu.Lock()
			dead = true
			mu.Unlock()
			leasers[0].kill()
			lost = leasers[0].unspent()
			break
		}
		time.Sleep(time.Millisecond)
	}
	wg.Wait()
	require.Positive(t, lost, "instance 0 never held an unspent lease to be killed with")
	assert.Empty(t, overWindows(h.all, window, limit))
	var inWindow int64
	for _, a := range h.all {
		if a.before.After(w) && a.after.Before(w.Add(window)) {
			inWindow++
		}
	}
	t.Logf("killed holding %d unspent units; the window admitted %d of %d", lost, inWindow, limit)
	assert.GreaterOrEqual(t, inWindow, int64(limit)-lost, "the survivors took the rest of the window's budget")
	lp, _ := p.Lease()
	assert.LessOrEqual(t, lost, lp.MaxUnits(limit), "a killed instance loses at most one lease")
}

// TestSoak runs the history checkers for SOAK_DURATION (make soak):
// rounds of random demand on three instances leasing a hot subject of
// each leased algorithm (a fixed window, a token bucket, GCRA, a sliding
// log, a sliding window counter) with the fault lane's faults at random
// (TestKilledInstanceOnlyUnderAdmits, TestHistoryThroughFaults): an
// instance killed holding leases and replaced, the third instance cut
// off from Redis for the rest of a round, Redis restarted (its
// append-only file written at every command); private servers only.
// Each round's admissions are checked (the windows against the whole
// run). Every loop is bounded by the duration and a round count. Without
// SOAK_DURATION it says so and does not run.
func TestSoak(t *testing.T) {
	d, err := time.ParseDuration(os.Getenv("SOAK_DURATION"))
	if err != nil || d <= 0 {
		t.Skip("SOAK_DURATION unset: make soak DURATION=30m runs this")
	}
	const limit = 300
	window := time.Second
	srv := redistest.Start(t, redistest.WithConfig("appendonly", "yes"), redistest.WithConfig("appendfsync", "always"))
	keys := redistest.RandomKeys(t)
	p := leasedPolicy(t, ratelimit.FixedWindow{Limit: limit, Window: window}, 0.2, 300*time.Millisecond)
	bp := bucketPolicies(t)
	withID := func(q ratelimit.Policy, id ratelimit.PolicyID) ratelimit.Policy {
		lp, _ := q.Lease()
		r, err := ratelimit.NewPolicy(ratelimit.PolicySpec{ID: id, Revision: 1, Algorithm: q.Algorithm(), Params: q.Params(), MaxCost: 1,
			CleanupGrace: time.Minute, MaxClockRegression: 2 * time.Second, FailurePolicy: ratelimit.FailClosed, Lease: &lp})
		require.NoError(t, err)
		return r
	}
	tb, gc, sl := withID(bp["token bucket"], "hot-tb"), withID(bp["gcra"], "hot-gcra"), withID(slidingPolicy(t), "hot-sl")
	swc := withID(windowPolicies(t)["sliding window counter"].p, "hot-swc")
	pols := []ratelimit.Policy{p, tb, gc, sl, swc}
	proxy := redistest.StartProxy(t, srv.Addr())
	mk := func(inst int) *Leaser {
		if inst == 2 { // the one a partition cuts off
			return newLeaser(t, changetest.Provider(t, changetest.ClientAt(t, proxy.Addr()), keys, pols...), pols)
		}
		return newLeaser(t, provider(t, srv, keys, pols), pols)
	}
	leasers := []*Leaser{mk(0), mk(1), mk(2)}
	s := changetest.RandomSubject(t)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 37))
	var h history                        // the fixed window's, the whole run
	rounds := make([]history, len(pols)) // each policy's, this round
	checked := 0
	deadline := time.Now().Add(d)
	kills, cuts, restarts := 0, 0, 0
	for round := 0; round < 1_000_000 && time.Now().Before(deadline); round++ {
		var wg sync.WaitGroup
		stop := time.Now().Add(time.Duration(200+rng.IntN(800)) * time.Millisecond)
		for inst, l := range leasers {
			workers, pause := 1+rng.IntN(4), time.Duration(rng.IntN(3))*time.Millisecond
			for w := range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < 5000 && time.Now().Before(stop); i++ {
						k := (w + i) % len(pols)
						before := time.Now()
						if admitted(l.Evaluate(context.Background(), request(pols[k], s))) {
							a := admission{inst, before, time.Now()}
							rounds[k].record(a)
							if k == 0 {
								h.record(a)
							}
						}
						time.Sleep(pause)
					}
				}()
			}
		}
		cut := false
		time.Sleep(time.Duration(rng.IntN(150)) * time.Millisecond)
		switch rng.IntN(8) {
		case 0, 1:
			// Kill one mid-round, holding whatever it holds.
			leasers[rng.IntN(len(leasers))].kill()
			kills++
		case 2:
			proxy.Refuse() // until the round ends
			cut = true
			cuts++
		case 3:
			srv.Restart()
			restarts++
		}
		wg.Wait()
		if cut {
			require.NoError(t, proxy.Accept())
		}
		for i, l := range leasers {
			if l.isClosed() {
				leasers[i] = mk(i)
			}
		}
		require.Empty(t, overWindows(h.all, window, limit), "round %d", round)
		for k := range pols {
			all := rounds[k].all
			checked += len(all)
			var over []string
			switch k {
			case 1, 2:
				over, _ = bucketExcess(all, 100, bucketPerMs, 2*time.Millisecond)
			case 3:
				over, _ = overSliding(all, slidingWindow, 2*time.Millisecond, 100)
			case 4: // this round's only: the window before it may be unseen
				over = overCounter(all, time.Second, 200)
			}
			require.Empty(t, over, "round %d, %s", round, pols[k].ID())
			rounds[k] = history{}
		}
	}
	t.Logf("soak: %v, %d admissions checked (%d of the fixed window), %d kills, %d partitions, %d Redis restarts", d, checked, len(h.all), kills, cuts, restarts)
}

// TestHistoryThroughFaults (issue 37 item 4): three instances of a
// leased subject under a steady load for three windows while one is cut
// off from Redis (a partition: its connections closed, new ones refused)
// and then Redis is restarted (with an append-only file written at every
// command, so the restart keeps what was counted). A partitioned instance
// admits only from the lease it holds, until that lease ends, then fails
// closed; the checker finds no window over the limit.
func TestHistoryThroughFaults(t *testing.T) {
	const limit = 300
	window := time.Second
	srv := redistest.Start(t, redistest.WithConfig("appendonly", "yes"), redistest.WithConfig("appendfsync", "always"))
	keys := redistest.RandomKeys(t)
	p := leasedPolicy(t, ratelimit.FixedWindow{Limit: limit, Window: window}, 0.2, 300*time.Millisecond)
	pols := []ratelimit.Policy{p}
	proxy := redistest.StartProxy(t, srv.Addr())
	leasers := []*Leaser{
		newLeaser(t, provider(t, srv, keys, pols), pols),
		newLeaser(t, provider(t, srv, keys, pols), pols),
		newLeaser(t, changetest.Provider(t, changetest.ClientAt(t, proxy.Addr()), keys, pols...), pols),
	}
	s := changetest.RandomSubject(t)
	var h history
	w := time.UnixMilli((time.Now().UnixMilli()/window.Milliseconds() + 1) * window.Milliseconds())
	time.Sleep(time.Until(w))
	end := w.Add(3 * window)
	var wg sync.WaitGroup
	var cutAdmitted atomicCount
	var cutMu sync.Mutex
	var cutAt time.Time // when the partition took effect; zero before
	cutSince := func(t time.Time) bool {
		cutMu.Lock()
		defer cutMu.Unlock()
		return !cutAt.IsZero() && t.After(cutAt)
	}
	for inst, l := range leasers {
		for range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 20_000 && time.Now().Before(end); i++ {
					before := time.Now()
					if admitted(l.Evaluate(context.Background(), request(p, s))) {
						h.record(admission{inst, before, time.Now()})
						if inst == 2 && cutSince(before) && time.Now().Before(w.Add(1800*time.Millisecond)) {
							cutAdmitted.add(1)
						}
					}
					// The first window below the limit (leases keep units
					// when the cut comes), the rest far above it (a restart
					// that lost the counts would show).
					pause := 2 * time.Millisecond
					if time.Now().Before(w.Add(window)) {
						pause = 37 * time.Millisecond
					}
					time.Sleep(pause)
				}
			}()
		}
	}
	time.Sleep(time.Until(w.Add(300 * time.Millisecond)))
	proxy.Refuse()
	cutMu.Lock()
	cutAt = time.Now() // admissions after this come from one lease at most
	cutMu.Unlock()
	time.Sleep(time.Until(w.Add(1100 * time.Millisecond)))
	srv.Restart()
	restarted := time.Now()
	time.Sleep(time.Until(w.Add(1800 * time.Millisecond)))
	require.NoError(t, proxy.Accept())
	wg.Wait()
	assert.Empty(t, overWindows(h.all, window, limit))
	perWindow := map[int64]int{}
	for _, a := range h.all {
		perWindow[a.before.Sub(w).Milliseconds()/window.Milliseconds()]++
	}
	var afterRestart int
	for _, a := range h.all {
		if a.before.After(restarted) && a.after.Before(w.Add(2*window)) {
			afterRestart++
		}
	}
	t.Logf("admissions per window from the first: %v; %d after the restart in its window (at %v)", perWindow, afterRestart, restarted.Sub(w))
	lp, _ := p.Lease()
	t.Logf("%d admissions checked; the partitioned instance admitted %d while cut off (at most its lease, %d)", len(h.all), cutAdmitted.load(), lp.MaxUnits(limit))
	assert.LessOrEqual(t, cutAdmitted.load(), lp.MaxUnits(limit), "cut off, an instance admits only from the lease it held")
}
