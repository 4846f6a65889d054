package ratefallback

import (
	"fmt"
	"math"
	"time"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// SharePolicy returns the policy one instance enforces locally for the
// LocalFallback policy p: the same ID, revision, algorithm and windows with
// the limit (capacity, burst) p.FallbackShare() and, for the token bucket
// and GCRA, the rate divided by FallbackInstances (the period multiplied
// by it; when that is out of range, the refill tokens or the rate divided,
// rounded down, at least 1), failing closed.
func SharePolicy(p ratelimit.Policy) (ratelimit.Policy, error) {
	share := p.FallbackShare()
	if share < 1 {
		return ratelimit.Policy{}, fmt.Errorf("policy %q is not local-fallback", p.ID())
	}
	n := p.FallbackInstances()
	spec := ratelimit.PolicySpec{
		ID: p.ID(), Revision: p.Revision(), Algorithm: p.Algorithm(),
		MaxCost: min(p.MaxCost(), share), CleanupGrace: p.CleanupGrace(), MaxClockRegression: p.MaxClockRegression(),
		FailurePolicy: ratelimit.FailClosed,
	}
	switch v := p.Params().(type) {
	case ratelimit.FixedWindow:
		spec.Params = ratelimit.FixedWindow{Limit: share, Window: v.Window}
	case ratelimit.SlidingWindowCounter:
		spec.Params = ratelimit.SlidingWindowCounter{Limit: share, Window: v.Window}
	case ratelimit.SlidingLog:
		spec.Params = ratelimit.SlidingLog{Limit: share, Window: v.Window}
	case ratelimit.TokenBucket:
		if v.RefillPeriod > 0 && n <= math.MaxInt64/int64(v.RefillPeriod) {
			spec.Params = ratelimit.TokenBucket{Capacity: share, RefillTokens: v.RefillTokens, RefillPeriod: v.RefillPeriod * time.Duration(n)}
			if sp, err := ratelimit.NewPolicy(spec); err == nil {
				return sp, nil
			}
		}
		spec.Params = ratelimit.TokenBucket{Capacity: share, RefillTokens: max(1, v.RefillTokens/n), RefillPeriod: v.RefillPeriod}
	case ratelimit.GCRA:
		if v.Period > 0 && n <= math.MaxInt64/int64(v.Period) {
			spec.Params = ratelimit.GCRA{Rate: v.Rate, Period: v.Period * time.Duration(n), Burst: share}
			if sp, err := ratelimit.NewPolicy(spec); err == nil {
				return sp, nil
			}
		}
		spec.Params = ratelimit.GCRA{Rate: max(1, v.Rate/n), Period: v.Period, Burst: share}
	case ratelimit.LeakyBucket:
		return leakyShare(spec, v, share, n)
	default:
		return ratelimit.Policy{}, fmt.Errorf("policy %q: unknown parameters %T", p.ID(), v)
	}
	return ratelimit.NewPolicy(spec)
}

// leakyShare is a leaky bucket's local share (ADR 0028): the rate divided
// by n (the period times n), a queue of share-1 with at most as many sent
// without delay, and the same MaxDelay. Its longest delay never exceeds
// the global queue's, so MaxDelay still holds: with emission interval T
// and share-1 <= (Q+1)/n - 1 for the global queue of Q, the local waiters
// beyond DelayAfter D wait at most (share-1-D)·n·T <= (Q+1-n-n·D)·T <=
// (Q-D)·T (n >= 1), and when D >= share-1 none waits at all.
func leakyShare(spec ratelimit.PolicySpec, v ratelimit.LeakyBucket, share, n int64) (ratelimit.Policy, error) {
	if v.Period <= 0 || n > math.MaxInt64/int64(v.Period) {
		return ratelimit.Policy{}, fmt.Errorf("policy %q: period %v times %d instances is out of range", spec.ID, v.Period, n)
	}
	q := ratelimit.LeakyBucket{Rate: v.Rate, Period: v.Period * time.Duration(n), QueueSize: share - 1, MaxDelay: v.MaxDelay}
	q.DelayAfter = min(v.DelayAfter, q.QueueSize)
	spec.Params, spec.MaxCost = q, min(spec.MaxCost, q.QueueSize+1)
	return ratelimit.NewPolicy(spec)
}
