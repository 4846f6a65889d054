package ratefallback

import (
	"context"
	"time"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// background runs a pass every f.every until Close.
func (f *Fallback) background() {
	defer f.wg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-f.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	t := time.NewTicker(f.every)
	defer t.Stop()
	for {
		select {
		case <-f.stop:
			return
		case <-t.C:
			f.pass(ctx, false)
		}
	}
}

// Reconcile charges, one subject at a time, everything pending that no
// request is charging, backoff or not, and returns the local admissions
// charged and how many charges failed (they stay pending). It is what
// the background pass does (that one skipping charges still backing
// off); ctx bounds it.
func (f *Fallback) Reconcile(ctx context.Context) (charged int64, failed int) {
	return f.pass(ctx, true)
}

// pass sweeps, then charges each due entry alone (Provider.Charge).
func (f *Fallback) pass(ctx context.Context, force bool) (charged int64, failed int) {
	now := f.now()
	f.mu.Lock()
	f.sweep(now, true)
	var due []*entry
	for _, e := range f.table {
		if e.owes() && e.charging == nil && (force || !now.Before(e.nextTry)) {
			due = append(due, e)
		}
	}
	f.mu.Unlock()
	for _, e := range due {
		if ctx.Err() != nil {
			return charged, failed
		}
		f.mu.Lock()
		if e.charging != nil || !e.owes() {
			f.mu.Unlock()
			continue // a request took it meanwhile
		}
		f.start(e)
		units := min(e.takenPending+e.takenReserve, e.policy.global.Limit())
		admitted := e.takenPending
		f.mu.Unlock()
		req := ratelimit.Request{PolicyID: e.policy.global.ID(), SubjectDigest: e.subject, Cost: 1, Deadline: f.now().Add(f.budget)}
		out := f.p.Charge(ctx, req, units)
		ok := ratelimit.Admitted(out)
		// An open breaker refused it at no cost: no backoff for that.
		f.settle(e, ok, !ok && ratelimit.CategoryOf(out) != ratelimit.CategoryCircuitOpen)
		if ok {
			charged += admitted
		} else {
			failed++
		}
	}
	return charged, failed
}

// Stats is what the fallback holds now (for metrics).
type Stats struct {
	// Pending is, per local-fallback policy, the local admissions not yet
	// charged to the global state (every policy listed, 0 included).
	Pending map[ratelimit.PolicyID]int64
	// Subjects is the number of entries in the local table; MaxSubjects
	// its bound.
	Subjects, MaxSubjects int
	// Dropped counts the local admissions dropped uncharged because their
	// window had passed; ChargeFailures the charges that failed (each is
	// retried). Both since New.
	Dropped, ChargeFailures uint64
}

// Stats returns the current Stats.
func (f *Fallback) Stats() Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := Stats{Pending: make(map[ratelimit.PolicyID]int64, len(f.local)), Subjects: len(f.table), MaxSubjects: f.max, Dropped: f.dropped, ChargeFailures: f.failures}
	for id := range f.local {
		s.Pending[id] = 0
	}
	for _, e := range f.table {
		s.Pending[e.policy.global.ID()] += e.pending
	}
	return s
}
