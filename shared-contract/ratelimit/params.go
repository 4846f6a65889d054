package ratelimit

import "time"

// Params is the sealed set of algorithm parameter types: FixedWindow,
// SlidingWindowCounter, TokenBucket, GCRA, SlidingLog and LeakyBucket, one
// per alg_<name>.go beside its AlgorithmSpec. No other package can add a
// type. Everything that varies by algorithm at the contract level is a
// method here or a field of the spec, never a switch (ADR 0034).
//
//sumtype:decl
type Params interface {
	// Algorithm is the algorithm these parameters belong to.
	Algorithm() Algorithm
	sealedParams()
}

// variant is what every Params variant answers besides Algorithm; Params
// itself keeps its one marker method, so the sum stays sealed, and Policy
// holds its parameters as a variant. register (algorithm.go) only takes a
// variant, so a parameter type that misses a method does not compile.
type variant interface {
	Params
	// limit is the window limit or the bucket capacity.
	limit() int64
	// windowMillis is the window, or the bucket's time to fill from empty.
	windowMillis() int64
	// horizonMillis bounds a decision's reset offset.
	horizonMillis() int64
	// validate checks the parameters' formulas of docs/arithmetic.md,
	// recording violations in v, and returns the limit MaxCost is checked
	// against and the parameters the policy keeps.
	validate(v *policyValidator, grace int64) (limit int64, kept variant)
	// fallbackShares lists the parameters one of n instances enforces
	// locally with a limit of share, most faithful first: the first that
	// NewPolicy accepts is the share, the last one's error is the error.
	fallbackShares(share, n int64) ([]Params, error)
}

// emitter is a Params variant that runs on the GCRA arithmetic (GCRA and
// the leaky bucket): Policy.Emission reads it.
type emitter interface {
	gcra() GCRA
}

// Policy's per-algorithm numbers: each asks its Params variant (or reads the
// one variant that has the number), so what varies by algorithm stays with
// the parameter types.

// Limit is the fixed/sliding window or sliding log limit, the token-bucket
// capacity or the GCRA burst; 0 for the zero Policy.
func (p Policy) Limit() int64 {
	if p.params == nil {
		return 0
	}
	return p.params.limit()
}

// WindowMillis is the policy's period in whole milliseconds: the window of a
// fixed or sliding window, and for a token bucket the time to refill from
// empty to full, ceil(Capacity * RefillPeriod / RefillTokens), and for GCRA
// the time to full from empty, ceil(Burst * Period / Rate), and for the
// sliding log its window; 0 for the zero
// Policy.
func (p Policy) WindowMillis() int64 {
	if p.params == nil {
		return 0
	}
	return p.params.windowMillis()
}

// HorizonMillis bounds, in milliseconds, how far a decision's reset may lie
// after the effective now: one window (fixed window, F2 of
// docs/arithmetic.md), two windows (sliding counter, S3), the time to fill
// (token bucket, T2), the time to full plus 1 ms (GCRA, G2), one window
// (sliding log, L2); 0 for the zero
// Policy. A policy whose leases its state holds until their end
// (AlgorithmSpec.LeaseRecords, ADR 0042) adds its lease's TTL: a sliding
// log's lease is admitted at its end and leaves a window after it.
func (p Policy) HorizonMillis() int64 {
	if p.params == nil {
		return 0
	}
	h := p.params.horizonMillis()
	if l, ok := p.Lease(); ok {
		if s, known := p.Algorithm().Spec(); known && s.LeaseRecords {
			h += l.TTL.Milliseconds()
		}
	}
	return h
}

// Refill returns a token bucket's RefillTokens and RefillPeriod in whole
// milliseconds; ok is false for the other algorithms and the zero Policy.
func (p Policy) Refill() (tokens, periodMillis int64, ok bool) {
	q, ok := p.params.(TokenBucket)
	if !ok {
		return 0, 0, false
	}
	return q.RefillTokens, q.RefillPeriod.Milliseconds(), true
}

// Emission returns a GCRA policy's emission interval Period/Rate as the
// reduced fraction periodMicros/rate of microseconds (GCRA.Emission) and its
// burst, and for a leaky bucket those of the GCRA it runs on (burst
// QueueSize+1; ADR 0028); ok is false for the other algorithms and the zero
// Policy.
func (p Policy) Emission() (rate, periodMicros, burst int64, ok bool) {
	e, ok := p.params.(emitter)
	if !ok {
		return 0, 0, 0, false
	}
	q := e.gcra()
	rate, periodMicros = q.Emission()
	return rate, periodMicros, q.Burst, true
}

// Queue returns a leaky bucket's DelayAfter and MaxDelay; ok is false for
// the other algorithms and the zero Policy.
func (p Policy) Queue() (delayAfter int64, maxDelay time.Duration, ok bool) {
	q, ok := p.params.(LeakyBucket)
	if !ok {
		return 0, 0, false
	}
	return q.DelayAfter, q.MaxDelay, true
}
