package ratelimit

import (
	"math"
	"time"
)

// Lease is a policy's opt-in lease (ADR 0042): an instance whose local
// demand for a subject is high reserves several units in one decision and
// admits from them locally, without a round trip, until they are spent or
// the lease ends. MaxShare is the largest part of the limit one lease may
// take, 0 < MaxShare <= 1; TTL is the longest a lease lasts, whole
// milliseconds, at most the policy's window (a lease also ends with the
// window it was taken in).
type Lease struct {
	MaxShare float64
	TTL      time.Duration
}

// MaxUnits is the most units one lease of policy limit limit may take:
// floor(MaxShare * limit), at least 1.
func (l Lease) MaxUnits(limit int64) int64 {
	return max(1, int64(math.Floor(l.MaxShare*float64(limit))))
}

// validateLease checks spec.Lease (nil: no lease) for the policy's
// algorithm and window in milliseconds.
func validateLease(v *policyValidator, spec PolicySpec, windowMs int64) (Lease, bool) {
	l := spec.Lease
	if l == nil {
		return Lease{}, false
	}
	if !(l.MaxShare > 0 && l.MaxShare <= 1) { // also refuses NaN
		v.fail("Lease.MaxShare", ErrUnsupported, "%v is not in (0, 1]", l.MaxShare)
	}
	ttl := v.millis("Lease.TTL", l.TTL, false)
	if windowMs > 0 && ttl > windowMs {
		v.fail("Lease.TTL", ErrUnsupported, "%v is longer than the policy's window %v", l.TTL, time.Duration(windowMs)*time.Millisecond)
	}
	if s, ok := spec.Algorithm.Spec(); ok && s.NoLease != "" {
		v.fail("Lease", ErrUnsupported, "a %s policy cannot lease (%s)", s.Name, s.NoLease)
	}
	return *l, true
}

// windowOf is q's window in milliseconds; 0 for nil or when valid is
// false (parameters that failed validation may not have one).
func windowOf(q variant, valid bool) int64 {
	if q == nil || !valid {
		return 0
	}
	return q.windowMillis()
}

// LeaseMaxCost is the largest Cost of a lease's reservation
// (Request.Lease): the larger of MaxCost and the lease's MaxUnits; MaxCost
// for a policy without a lease.
func (p Policy) LeaseMaxCost() int64 { return p.requestMaxCost(true) }

// LeaseUntil is when a lease reserved by a decision at server instant
// serverNow must stop admitting, in server time: TTL later, or, for an
// algorithm without lease records (AlgorithmSpec.LeaseRecords), at the
// end of the window serverNow is in (the windows are aligned to the Unix
// epoch in server time) if that is first, so that every admission from
// the lease falls in the window its reservation was counted in (ADR
// 0042). ok is false for a policy without a lease.
func (p Policy) LeaseUntil(serverNow time.Time) (until time.Time, ok bool) {
	l, ok := p.Lease()
	if s, known := p.Algorithm().Spec(); ok && known && s.LeaseRecords {
		return serverNow.Add(l.TTL), true
	}
	w := p.WindowMillis()
	if !ok || w <= 0 {
		return time.Time{}, false
	}
	ms := serverNow.UnixMilli()
	end := time.UnixMilli((ms/w + 1) * w)
	if byTTL := serverNow.Add(l.TTL); byTTL.Before(end) {
		return byTTL, true
	}
	return end, true
}

// LocalUntil is the local instant at which an instance stops using a
// lease whose reservation it sent at sent, decided at server instant
// serverNow and ending at until (LeaseUntil): sent's whole millisecond
// plus until - serverNow. The server floors its TIME to the millisecond,
// and its decision came after sent, so serverNow is no earlier than
// sent's whole millisecond and on one clock the lease ends here no later
// than there (ADR 0042).
func LocalUntil(sent, serverNow, until time.Time) time.Time {
	return sent.Truncate(time.Millisecond).Add(until.Sub(serverNow))
}
