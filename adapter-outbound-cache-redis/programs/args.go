package programs

import "github.com/tech-log/tech-log-backend/shared-contract/ratelimit"

// Positions in the argument list built by Args: index i is ARGV[i+1] in the
// programs. Every argument is a non-negative integer sent in canonical
// decimal; the programs answer StatusInvalid to anything else.
const (
	// ArgRevision is the policy revision (1..MaxExactInt, A2).
	ArgRevision = iota
	// ArgCost is the request cost (1..limit or capacity, A4).
	ArgCost
	// ArgMaxClockRegression is MaxClockRegression in ms (0..MaxHorizonMillis, A3).
	ArgMaxClockRegression
	// ArgCleanupGrace is CleanupGrace in ms (1..MaxHorizonMillis).
	ArgCleanupGrace
	// ArgLimit is the window limit, the bucket capacity or the GCRA burst
	// (F1, S1, T1, G1).
	ArgLimit
	// ArgWindow is the window length in ms, fixed window, sliding counter
	// and sliding log (F2, S2, S3, L2).
	ArgWindow
)

// Token-bucket positions after ArgLimit (the capacity).
const (
	// ArgRefillTokens is the tokens added per refill period (T2).
	ArgRefillTokens = ArgLimit + 1 + iota
	// ArgRefillPeriod is the refill period in ms (T1).
	ArgRefillPeriod
)

// GCRA positions after ArgLimit (the burst): the emission interval
// PeriodMicros/Rate microseconds, reduced (ratelimit.GCRA.Emission; G1).
const (
	// ArgRate is the reduced rate R, the emission interval's denominator.
	ArgRate = ArgLimit + 1 + iota
	// ArgPeriodMicros is the reduced period P in microseconds, the emission
	// interval's numerator.
	ArgPeriodMicros
	// ArgDelayAfter is a leaky bucket's delayAfter (0..queueSize): the
	// queued requests sent without delay (ADR 0028).
	ArgDelayAfter
)

// Argument counts (ARGV length) per program.
const (
	ArgCountWindow      = ArgWindow + 1       // fixed window, sliding counter, sliding log
	ArgCountTokenBucket = ArgRefillPeriod + 1 // token bucket
	ArgCountGCRA        = ArgPeriodMicros + 1 // gcra
	ArgCountLeakyBucket = ArgDelayAfter + 1   // leaky bucket

	// maxArgCount is the longest ARGV of an algorithm's decision program.
	maxArgCount = ArgCountLeakyBucket
)

// ArgCountRefund is the number of ARGV a refund program (RefundFor) appends
// to its algorithm's: the admission's effective instant in ms (RefundArgs).
const ArgCountRefund = 1

// RefundArgs returns the ARGV of p's refund program for giving back one
// admission of the given cost made at atMillis, the effectiveNowMillis of
// its ALLOWED reply (ADR 0025). It checks neither; the program answers
// StatusInvalid to a cost outside 1..limit or an instant outside
// 0..MaxServerMillis.
func RefundArgs(p ratelimit.Policy, cost, atMillis int64) []any {
	if p.IsZero() {
		return nil
	}
	return append(appendArgs(make([]any, 0, maxArgCount+ArgCountRefund), p, cost), atMillis)
}

// ArgCountLease is the number of ARGV a lease's reservation program
// (Bundle.Lease, ADR 0042) appends to its algorithm's: the lease's length
// in ms (ratelimit.Lease.TTL) and the reservation instant of the lease it
// replaces (0: none).
const ArgCountLease = 2

// ArgCountGiveBack is the number of ARGV a lease's give-back program
// (Bundle.GiveBack) appends: the reservation's effective instant (its
// receipt's) and the lease's length.
const ArgCountGiveBack = 2

// NumKeys is the number of KEYS every program takes: its one state hash.
const NumKeys = 1

// Args returns the ARGV of the program for p's algorithm, for one request of
// the given cost. It does not check cost; the program answers StatusInvalid
// when it is outside 1..limit. For the zero Policy it returns an empty list,
// which every program answers StatusInvalid.
func Args(p ratelimit.Policy, cost int64) []any {
	return appendArgs(make([]any, 0, maxArgCount), p, cost)
}

// appendArgs appends the ARGV that Args returns to dst and returns the
// extended slice, so a caller can reuse one buffer.
func appendArgs(dst []any, p ratelimit.Policy, cost int64) []any {
	if p.IsZero() {
		return dst
	}
	dst = append(dst, p.Revision(), cost, p.MaxClockRegression().Milliseconds(), p.CleanupGrace().Milliseconds(), p.Limit())
	if m := modelOf(p.Algorithm()); m != nil {
		return m.args(dst, p)
	}
	return dst
}
