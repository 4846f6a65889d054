package ratefallback

import "github.com/tech-log/tech-log-backend/shared-contract/ratelimit"

// SharePolicy returns the policy one instance enforces locally for the
// LocalFallback policy p: the same ID, revision, algorithm and windows with
// the limit (capacity, burst) p.FallbackShare() and, for the token bucket
// and GCRA, the rate divided by FallbackInstances (the period multiplied
// by it; when that is out of range, the refill tokens or the rate divided,
// rounded down, at least 1), failing closed. Each algorithm's share is its
// parameter type's (ratelimit.Policy.FallbackPolicy; ADR 0034).
func SharePolicy(p ratelimit.Policy) (ratelimit.Policy, error) {
	return p.FallbackPolicy()
}
