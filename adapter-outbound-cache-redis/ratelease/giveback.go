package ratelease

import (
	"context"
	"time"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// giveBack refunds e's unspent units with its reservation's receipt, on a
// context of its own bounded by the timeout (the request's may end
// first), and empties the lease either way: a refund that fails leaves
// the units counted, which can only under-admit. e.mu is held.
func (l *Leaser) giveBack(ctx context.Context, e *lease) {
	left := e.left
	e.left, e.until = 0, time.Time{}
	if left <= 0 || e.receipt.IsZero() {
		return
	}
	req := e.req
	req.Lease = true // the receipt's cost is the reservation's, up to LeaseMaxCost
	out := ratelimit.RefundDetached(ctx, l.inner, req, e.receipt.WithCost(left), l.now(), l.timeout)
	if ev, ok := out.(ratelimit.Evaluated); ok {
		l.emit(req.PolicyID, Returned, ev.Decision.Refunded)
		return
	}
	l.emit(req.PolicyID, NotReturned, left)
}

// sweepEvery is how often ended leases are given back and idle entries
// dropped.
const sweepEvery = 100 * time.Millisecond

// sweep gives back the unspent units of every lease that ended and drops
// the entries idle for two lease periods, until Close.
func (l *Leaser) sweep() {
	defer close(l.done)
	t := time.NewTicker(sweepEvery)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
			l.endLeases(false)
		}
	}
}

// endLeases gives back every ended lease (every lease when all is true)
// and, but when all, drops entries with nothing left and no recent
// demand.
func (l *Leaser) endLeases(all bool) {
	l.mu.Lock()
	entries := make(map[key]*lease, len(l.table))
	for k, e := range l.table {
		entries[k] = e
	}
	l.mu.Unlock()
	for k, e := range entries {
		e.mu.Lock()
		now := l.now()
		if e.left > 0 && (all || !now.Before(e.until)) {
			l.giveBack(context.Background(), e)
		}
		p := l.policies[k.policy]
		lp, _ := p.Lease()
		if e.left == 0 && !e.reserving && now.Sub(e.periodStart) >= 2*lp.TTL && !all {
			// Idle: dropped, so that the table holds only recent subjects
			// (lock order: an entry, then the table).
			l.mu.Lock()
			if l.table[k] == e {
				delete(l.table, k)
				e.dropped = true
			}
			l.mu.Unlock()
		}
		e.mu.Unlock()
	}
}

// Close stops the sweep and gives back the unspent units of every live
// lease (the process stops); later requests pass through. It does not
// close the port below.
func (l *Leaser) Close() {
	if l.stopSweep() {
		l.endLeases(true)
	}
}

// stopSweep marks l closed (later requests pass through) and stops the
// sweep; false when l was closed already.
func (l *Leaser) stopSweep() bool {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return false
	}
	l.closed = true
	l.mu.Unlock()
	close(l.stop)
	<-l.done
	return true
}
