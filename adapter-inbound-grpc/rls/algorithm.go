package rls

import (
	"fmt"
	"time"

	"github.com/tech-log/tech-log-backend/adapter-inbound-grpc/rlsconfig"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// algorithmSpec is the one place a rule's named algorithm becomes policy
// parameters: limit requests per window, read the way each algorithm
// reads a rate (the sliding window counter and log over the window, the
// token bucket full at limit and refilled limit per window, GCRA limit per
// window with a burst of limit). A leaky bucket is refused: it admits with
// a delay the caller must wait, and Envoy's filter has no way to wait.
func algorithmSpec(a *rlsconfig.Algorithm, limit int64, window time.Duration) (ratelimit.PolicySpec, error) {
	alg, err := ratelimit.ParseAlgorithm(a.Name)
	if err != nil {
		return ratelimit.PolicySpec{}, fmt.Errorf("algorithm: %w", err)
	}
	spec := ratelimit.PolicySpec{Algorithm: alg, MaxCost: limit}
	switch alg {
	case ratelimit.AlgorithmFixedWindow:
		spec.Params = ratelimit.FixedWindow{Limit: limit, Window: window}
	case ratelimit.AlgorithmSlidingWindowCounter:
		spec.Params = ratelimit.SlidingWindowCounter{Limit: limit, Window: window}
	case ratelimit.AlgorithmSlidingLog:
		spec.Params = ratelimit.SlidingLog{Limit: limit, Window: window}
	case ratelimit.AlgorithmTokenBucket:
		spec.Params = ratelimit.TokenBucket{Capacity: limit, RefillTokens: limit, RefillPeriod: window}
	case ratelimit.AlgorithmGCRA:
		spec.Params = ratelimit.GCRA{Rate: limit, Period: window, Burst: limit}
	default:
		return ratelimit.PolicySpec{}, fmt.Errorf("algorithm %v: %w: it delays requests, which Envoy cannot do", alg, ErrUnsupportedRule)
	}
	return spec, nil
}
