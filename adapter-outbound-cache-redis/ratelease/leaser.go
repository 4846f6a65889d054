package ratelease

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// DefaultMaxSubjects bounds the lease table when Options.MaxSubjects is 0.
const DefaultMaxSubjects = 100_000

// Event is what Options.Observe is told: a reservation, units given back
// or an admission answered from a lease.
type Event string

// The events, with their units.
const (
	// Reserved: a reservation was admitted; units is its size.
	Reserved Event = "reserved"
	// Returned: unspent units were given back (the refund was evaluated).
	Returned Event = "returned"
	// Local: one request was admitted from a lease; units is its cost.
	Local Event = "local"
	// NotReturned: giving unspent units back failed; they stay counted
	// until the window ends (under-admission only).
	NotReturned Event = "not_returned"
)

// Options configures a Leaser.
type Options struct {
	// Policies are the policies the port below serves; those with a lease
	// are leased, the others pass through.
	Policies []ratelimit.Policy
	// MaxSubjects bounds the table of leases (0: DefaultMaxSubjects); a
	// subject beyond it is decided by the port below, one request at a
	// time.
	MaxSubjects int
	// Timeout bounds the refund that gives unspent units back when a lease
	// ends (the edge's evaluation timeout, which must leave the port below
	// its command timeout); required.
	Timeout time.Duration
	// Observe, optional, is told about every event, synchronously.
	Observe func(policy ratelimit.PolicyID, ev Event, units int64)
	// Now, optional, is the clock (time.Now when nil); the lease ends are
	// on its monotonic reading.
	Now func() time.Time
}

// ErrInvalidOptions is wrapped by New's errors.
var ErrInvalidOptions = errors.New("ratelease: invalid options")

// Leaser is the lease decorator. It is safe for concurrent use; build it
// with New and Close it at the end.
type Leaser struct {
	inner    ratelimit.EdgePort
	policies map[ratelimit.PolicyID]ratelimit.Policy // the leased ones
	max      int
	timeout  time.Duration
	observe  func(ratelimit.PolicyID, Event, int64)
	now      func() time.Time
	// until is when a lease reserved at a server instant ends
	// (Policy.LeaseUntil; a test breaks it to show the checker fails).
	until func(ratelimit.Policy, time.Time) (time.Time, bool)

	mu     sync.Mutex
	table  map[key]*lease
	closed bool
	stop   chan struct{}
	done   chan struct{}
}

type key struct {
	policy  ratelimit.PolicyID
	subject ratelimit.SubjectDigest
}

// lease is one subject's lease under one policy and the demand it is
// sized from; mu is held while it is used or given back, and released
// while a reservation is sent (reserving: the subject's other requests
// then pass on, one reservation at a time).
type lease struct {
	mu sync.Mutex
	// reserving: a reservation is in flight.
	reserving bool
	// left units of the live lease, its local end, its reservation's
	// request, receipt and decision.
	left     int64
	until    time.Time
	req      ratelimit.Request
	receipt  ratelimit.Receipt
	decision ratelimit.Decision
	sent     time.Time
	// remaining is the budget's remaining after the last decision from
	// the port below (-1: none yet).
	remaining int64
	// demand: requests in the current and the previous lease period.
	periodStart time.Time
	cur, prev   int64
	// dropped: the sweep removed the entry from the table.
	dropped bool
}

// New returns the leaser over inner. It starts the sweep that gives back
// the units of leases that ended; Close stops it.
func New(inner ratelimit.EdgePort, opt Options) (*Leaser, error) {
	if inner == nil {
		return nil, fmt.Errorf("%w: a port to decorate is required", ErrInvalidOptions)
	}
	if opt.Timeout <= 0 {
		return nil, fmt.Errorf("%w: Timeout %v must be positive", ErrInvalidOptions, opt.Timeout)
	}
	if opt.MaxSubjects < 0 {
		return nil, fmt.Errorf("%w: MaxSubjects %d is negative", ErrInvalidOptions, opt.MaxSubjects)
	}
	l := &Leaser{inner: inner, policies: map[ratelimit.PolicyID]ratelimit.Policy{}, max: opt.MaxSubjects,
		timeout: opt.Timeout, observe: opt.Observe, now: opt.Now, table: map[key]*lease{},
		stop: make(chan struct{}), done: make(chan struct{}), until: ratelimit.Policy.LeaseUntil}
	if l.max == 0 {
		l.max = DefaultMaxSubjects
	}
	if l.now == nil {
		l.now = time.Now
	}
	for _, p := range opt.Policies {
		if _, ok := p.Lease(); ok {
			l.policies[p.ID()] = p
		}
	}
	go l.sweep()
	return l, nil
}

// Evaluate answers req from its subject's lease when one is live and
// holds req.Cost, reserves a new lease when the subject's demand is high,
// and otherwise passes req on.
func (l *Leaser) Evaluate(ctx context.Context, req ratelimit.Request) (out ratelimit.Outcome) {
	defer ratelimit.Recover(&out, req.PolicyID, "ratelease")
	p, ok := l.policies[req.PolicyID]
	if !ok || req.EvaluationID != "" || req.Lease || req.Cost < 1 || req.Cost > p.MaxCost() {
		return l.inner.Evaluate(ctx, req)
	}
	e := l.lock(key{req.PolicyID, req.SubjectDigest})
	if e == nil {
		return l.inner.Evaluate(ctx, req)
	}
	locked := true
	defer func() {
		if locked {
			e.mu.Unlock()
		}
	}()
	// passOn decides req below without the entry's lock, so that the
	// subject's other requests are not queued behind it (a cold subject,
	// a scarce budget), and keeps the remaining budget it reports.
	passOn := func() ratelimit.Outcome {
		e.mu.Unlock()
		locked = false
		out := l.inner.Evaluate(ctx, req)
		e.mu.Lock()
		locked = true
		e.observed(out)
		return out
	}
	now := l.now()
	e.count(now, p)
	if e.left >= req.Cost && now.Before(e.until) {
		e.left -= req.Cost
		l.emit(req.PolicyID, Local, req.Cost)
		return ratelimit.Evaluated{Decision: e.local(now)}
	}
	if e.left > 0 {
		l.giveBack(ctx, e) // the lease ended (or cannot pay this cost)
	}
	k := e.size(p, req.Cost)
	if k <= req.Cost || e.reserving {
		// No lease worth reserving, or another request's reservation in
		// flight: this request goes below at once rather than wait for
		// it, so that no request waits longer than its own round trip.
		return passOn()
	}
	// The reservation does not keep the lock while it is sent: the
	// subject's other requests pass on meanwhile (reserving).
	res := req
	// The previous lease (ended or spent, its unspent units given back
	// above) goes with this reservation: an algorithm that records leases
	// drops its record, so this instance holds one.
	res.Cost, res.Lease, res.Replaces = k, true, e.receipt
	e.reserving = true
	e.mu.Unlock()
	locked = false
	sent := l.now()
	out = l.inner.Evaluate(ctx, res)
	e.mu.Lock()
	locked = true
	e.reserving = false
	ev, ok := out.(ratelimit.Evaluated)
	if !ok || !ev.Decision.Allowed {
		// Refused, denied or undecided: this request alone, as without
		// the decorator (a fallback serves no reservation; a denial of k
		// says nothing of req.Cost).
		e.observed(out)
		return passOn()
	}
	until, ok := l.until(p, ev.Decision.ServerNow)
	if !ok || ev.Decision.ServerNow.IsZero() || ev.Decision.Receipt.IsZero() || l.isClosed() {
		// No server instant to end the lease by, no receipt to give it
		// back with, or the leaser closed while the reservation was out:
		// the reservation is this request's alone, its other units go
		// back now, and the caller's receipt is for its own cost.
		e.observed(out)
		d := ev.Decision
		e.left, e.until = 0, time.Time{}
		if !d.Receipt.IsZero() {
			e.req, e.receipt, e.left = req, d.Receipt, k-req.Cost
			l.giveBack(ctx, e)
			d.Receipt = d.Receipt.WithCost(req.Cost)
		}
		return ratelimit.Evaluated{Decision: d}
	}
	l.emit(req.PolicyID, Reserved, k)
	e.req, e.receipt, e.decision, e.sent = req, ev.Decision.Receipt, ev.Decision, sent
	e.left = k - req.Cost
	// Counted from when the reservation was sent (its whole millisecond:
	// the server's instant is later, floored to its millisecond), so the
	// lease ends here before it ends there.
	e.until = ratelimit.LocalUntil(sent, ev.Decision.ServerNow, until)
	e.observed(out)
	l.emit(req.PolicyID, Local, req.Cost)
	return ratelimit.Evaluated{Decision: e.local(now)}
}

// EvaluateSet passes the set on: a set's members are decided together.
func (l *Leaser) EvaluateSet(ctx context.Context, req ratelimit.SetRequest) ratelimit.Outcome {
	return l.inner.EvaluateSet(ctx, req)
}

// Refund passes the refund on.
func (l *Leaser) Refund(ctx context.Context, req ratelimit.Request, r ratelimit.Receipt) ratelimit.Outcome {
	return l.inner.Refund(ctx, req, r)
}

// lock returns k's lease locked, created when the table has room; nil
// when it has none or the leaser is closed. An entry the sweep dropped
// while this waited for it is looked up again (at most three times).
func (l *Leaser) lock(k key) *lease {
	for range 3 {
		e := l.entry(k)
		if e == nil {
			return nil
		}
		e.mu.Lock()
		if !e.dropped {
			return e
		}
		e.mu.Unlock()
	}
	return nil
}

// entry is k's lease, created when the table has room; nil when it has
// none or the leaser is closed.
func (l *Leaser) entry(k key) *lease {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	e, ok := l.table[k]
	if !ok {
		if len(l.table) >= l.max {
			return nil
		}
		e = &lease{remaining: -1}
		l.table[k] = e
	}
	return e
}

// count records one request at now in the demand of lease period p's
// TTL.
func (e *lease) count(now time.Time, p ratelimit.Policy) {
	lp, _ := p.Lease()
	switch since := now.Sub(e.periodStart); {
	case e.periodStart.IsZero() || since >= 2*lp.TTL:
		e.periodStart, e.prev, e.cur = now, 0, 0
	case since >= lp.TTL:
		e.periodStart, e.prev, e.cur = e.periodStart.Add(lp.TTL), e.cur, 0
	}
	e.cur++
}

// size is the reservation for a request of cost under p: the demand of
// one lease period (the larger of the last and the current one's), at
// most the lease's MaxUnits and at most the remaining budget times
// MaxShare, at least cost.
func (e *lease) size(p ratelimit.Policy, cost int64) int64 {
	lp, _ := p.Lease()
	k := min(max(e.cur, e.prev), lp.MaxUnits(p.Limit()))
	if e.remaining >= 0 {
		k = min(k, int64(float64(e.remaining)*lp.MaxShare))
	}
	return max(k, cost)
}

// isClosed reports whether l was closed (or killed in a test).
func (l *Leaser) isClosed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.closed
}

// observed keeps the remaining budget a decision from below reports.
func (e *lease) observed(out ratelimit.Outcome) {
	if ev, ok := out.(ratelimit.Evaluated); ok {
		e.remaining = ev.Decision.Remaining
	}
}

// local is the decision of an admission from the lease at now: the
// reservation's, its remaining what the server had left plus what the
// lease has, its server instant moved on by the time since it was sent,
// and no receipt (a lease's unit is given back with the lease).
func (e *lease) local(now time.Time) ratelimit.Decision {
	d := e.decision
	d.Remaining += e.left
	if elapsed := now.Sub(e.sent); elapsed > 0 && !d.ServerNow.IsZero() {
		d.ServerNow = d.ServerNow.Add(elapsed)
	}
	d.Receipt = ratelimit.Receipt{}
	d.Refunded = 0
	return d
}

func (l *Leaser) emit(p ratelimit.PolicyID, ev Event, units int64) {
	if l.observe != nil {
		l.observe(p, ev, units)
	}
}
