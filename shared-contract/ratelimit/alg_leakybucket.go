package ratelimit

import (
	"fmt"
	"math"
	"time"
)

// LeakyBucket is the leaky bucket as a queue (ADR 0028): requests leave at
// Rate per Period (whole milliseconds), one emission interval Period/Rate
// apart on the server clock. A request that finds the queue empty goes at
// once; one beyond the rate is admitted with a delay, its slot, while at
// most QueueSize requests are waiting, the first DelayAfter of them
// without delay (nginx's delay=); beyond that it is denied. It runs on the
// GCRA arithmetic with a burst of QueueSize+1, so Limit is QueueSize+1.
// MaxDelay is the longest a caller holds an admitted request; it must be
// at least the longest delay the queue can give (LongestDelay).
type LeakyBucket struct {
	Rate       int64
	Period     time.Duration
	QueueSize  int64
	DelayAfter int64
	MaxDelay   time.Duration
}

var leakyBucketSpec = register[LeakyBucket](AlgorithmSpec{
	Algorithm: AlgorithmLeakyBucket,
	Name:      "leaky_bucket",
	// nginx's limit_req rate, burst and delay= (ADR 0028).
	fields: []ParamField{
		{Name: "rate", Kind: FieldInt}, {Name: "period", Kind: FieldDuration}, {Name: "queueSize", Kind: FieldInt},
		{Name: "delayAfter", Kind: FieldInt, Optional: true}, {Name: "maxDelay", Kind: FieldDuration, Optional: true},
	},
	// delayAfter defaults to 0 (every waiter is delayed, nginx's default)
	// and maxDelay to the queue's longest delay.
	Build: func(v FieldValues) Params {
		q := LeakyBucket{Rate: v.Ints["rate"], Period: v.Durations["period"], QueueSize: v.Ints["queueSize"], DelayAfter: v.Ints["delayAfter"]}
		if d, ok := v.Durations["maxDelay"]; ok {
			q.MaxDelay = d
		} else {
			q.MaxDelay = q.LongestDelay()
		}
		return q
	},
	Certainty: Certain,
	// The leaky bucket is GCRA with a burst of queueSize+1: its denials are
	// the queue being full until a computable instant, exact as GCRA's.
	DenialCacheExact: true,
	DecidesInMicros:  true,
	// A replay would answer an admission whose slot the caller may have
	// given back (Refunder): a free pass.
	NoDedup: "a replayed admission would skip the queue",
	// A held request would hold every member's admission.
	NoSetMember: "a queue cannot be a set member (ADR 0028)",
	Delays:      true,
	Charge:      true,
	NoLease:     "a queue admits with a delay; a lease admits at once (ADR 0042)",
	Refund:      true,
})

// gcra implements emitter: the GCRA the queue runs on, burst QueueSize+1.
func (q LeakyBucket) gcra() GCRA {
	return GCRA{Rate: q.Rate, Period: q.Period, Burst: q.QueueSize + 1}
}

// LongestDelay is the longest delay the queue can give a request,
// (QueueSize - DelayAfter) emission intervals rounded up to a whole
// millisecond; 0 for parameters without an emission interval or whose
// product (QueueSize - DelayAfter) * period exceeds int64 (NewPolicy
// refuses both).
func (q LeakyBucket) LongestDelay() time.Duration {
	rate, per := q.gcra().Emission()
	waiting := q.QueueSize - q.DelayAfter
	if rate < 1 || waiting <= 0 || !mulFits(waiting, per) {
		return 0
	}
	return time.Duration(ceilDiv(ceilDiv(waiting*per, rate), 1000)) * time.Millisecond
}

// Algorithm implements Params.
func (LeakyBucket) Algorithm() Algorithm { return AlgorithmLeakyBucket }

func (q LeakyBucket) limit() int64         { return q.QueueSize + 1 }
func (q LeakyBucket) windowMillis() int64  { return q.gcra().windowMillis() }
func (q LeakyBucket) horizonMillis() int64 { return q.gcra().horizonMillis() }

// validate checks the queue's fields and then formulas G1-G2 on the GCRA
// it runs on (burst QueueSize+1; ADR 0028): 0 <= DelayAfter <= QueueSize,
// and the longest delay a request can be given, ceil((QueueSize -
// DelayAfter) emission intervals) in whole milliseconds, at most MaxDelay,
// so an admitted request can always be held to its slot.
func (q LeakyBucket) validate(v *policyValidator, grace int64) (int64, variant) {
	if q.QueueSize < 0 {
		v.fail("Params.QueueSize", ErrNonPositive, "%d: want 0 or more", q.QueueSize)
	}
	if q.DelayAfter < 0 || q.DelayAfter > max(q.QueueSize, 0) {
		v.fail("Params.DelayAfter", ErrArithmeticRange, "%d: want 0..queueSize %d", q.DelayAfter, q.QueueSize)
	}
	maxDelay := v.millis("Params.MaxDelay", q.MaxDelay, true)
	if q.QueueSize >= MaxExactInt {
		// QueueSize+1 is the burst, at most M (G1); refused here, before
		// QueueSize+1 could overflow.
		v.fail("Params.QueueSize", ErrArithmeticRange, "%d: the burst queueSize+1 would exceed %d", q.QueueSize, MaxExactInt)
	}
	if q.QueueSize < 0 || q.QueueSize >= MaxExactInt {
		return 0, q
	}
	errs := len(v.errs)
	limit, _ := q.gcra().validate(v, grace)
	if len(v.errs) > errs {
		return limit, q
	}
	if longest := q.LongestDelay(); longest > time.Duration(maxDelay)*time.Millisecond {
		v.fail("Params.MaxDelay", ErrArithmeticRange, "%v: the longest delay of this queue is %v ((queueSize - delayAfter) emission intervals)", q.MaxDelay, longest)
	}
	return limit, q
}

// fallbackShares is a leaky bucket's local share (ADR 0028): the rate
// divided by n (the period times n), a queue of share-1 with at most as
// many sent without delay, and the same MaxDelay. Its longest delay never
// exceeds the global queue's, so MaxDelay still holds: with emission
// interval T and share-1 <= (Q+1)/n - 1 for the global queue of Q, the
// local waiters beyond DelayAfter D wait at most (share-1-D)·n·T <=
// (Q+1-n-n·D)·T <= (Q-D)·T (n >= 1), and when D >= share-1 none waits at
// all. Its MaxCost is at most its burst, share, as every share's is.
func (q LeakyBucket) fallbackShares(share, n int64) ([]Params, error) {
	if q.Period <= 0 || n > math.MaxInt64/int64(q.Period) {
		return nil, fmt.Errorf("period %v times %d instances is out of range", q.Period, n)
	}
	s := LeakyBucket{Rate: q.Rate, Period: q.Period * time.Duration(n), QueueSize: share - 1, MaxDelay: q.MaxDelay}
	s.DelayAfter = min(q.DelayAfter, s.QueueSize)
	return []Params{s}, nil
}

func (LeakyBucket) sealedParams() {}
