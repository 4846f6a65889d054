package programs

import "github.com/tech-log/tech-log-backend/shared-contract/ratelimit"

// numbers are a policy's parameters in the integer milliseconds the programs
// receive.
type numbers struct {
	alg        ratelimit.Algorithm
	limit      int64 // limit or capacity
	win        int64 // window (fixed, sliding)
	rate, per  int64 // refill tokens, refill period (token bucket); reduced rate, period in µs (GCRA)
	grace, reg int64
	fullScaled int64 // token bucket: C*P; GCRA: B*P
	// delays: an admission may carry a delay (a leaky bucket's;
	// ratelimit.AlgorithmSpec.Delays).
	delays bool
	// delayAfterScaled is a leaky bucket's delayAfter emission intervals,
	// delayAfter*P in 1/R µs (ADR 0028).
	delayAfterScaled int64
	horizonMs        int64 // ratelimit.Policy.HorizonMillis
	// longestDelayMs bounds a leaky bucket's delay (LeakyBucket.LongestDelay).
	longestDelayMs int64
	// leaseMs is the lease's TTL of a policy whose state holds its leases
	// until their end (AlgorithmSpec.LeaseRecords, ADR 0042), else 0: a
	// sliding log's lease entry is up to that far in the future.
	leaseMs int64
}

func numbersOf(p ratelimit.Policy) numbers {
	n := numbers{
		alg:       p.Algorithm(),
		limit:     p.Limit(),
		grace:     p.CleanupGrace().Milliseconds(),
		reg:       p.MaxClockRegression().Milliseconds(),
		horizonMs: p.HorizonMillis(),
	}
	if spec, ok := p.Algorithm().Spec(); ok {
		n.delays = spec.Delays
		if l, leases := p.Lease(); leases && spec.LeaseRecords {
			n.leaseMs = l.TTL.Milliseconds()
		}
	}
	if m := modelOf(n.alg); m != nil {
		n = m.fill(p, n)
	}
	return n
}

// horizon bounds resetAt - effectiveNow: one window (F2, L2), two windows
// (S3), the time to fill from empty (T2), the time to full plus 1 ms (G2).
func (n numbers) horizon() int64 { return n.horizonMs }
