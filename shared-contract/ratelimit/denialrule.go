package ratelimit

// MaxDenialCacheEntries bounds the local denial cache's table (the
// adapter's Options.MaxEntries, the configuration's
// APP_RATE_LIMIT_DENIAL_CACHE_MAX_ENTRIES).
const MaxDenialCacheEntries = 1_000_000

// DenialCacheExact reports whether a local denial cache is exact for
// algorithm a: with no other traffic and no reset, a request the server
// denied with retry-after R stays denied, for that cost and every larger
// one, at every instant before R has passed on the server's clock. This is
// the rule per algorithm (docs/programs.md, "Denial cache"): the cache
// (ratedenial.Exact) and the policy file's check of "denialCache" both ask
// it; an algorithm not listed here is never cached.
func DenialCacheExact(a Algorithm) bool {
	switch a {
	case AlgorithmFixedWindow:
		// The window's count only grows until its end; retry = end - eff
		// for every cost.
		return true
	case AlgorithmTokenBucket:
		// The level grows at the refill rate; retry = ceil((need-s)/R) is
		// the first millisecond the level reaches need.
		return true
	case AlgorithmSlidingWindowCounter:
		// The estimate never grows without traffic (the weight falls,
		// and at a window's end the estimate falls to the current
		// count); retry is the smallest honest one. Exact with respect
		// to the program (the program itself approximates a sliding
		// window).
		return true
	case AlgorithmGCRA, AlgorithmLeakyBucket:
		// The leaky bucket is GCRA with a burst of queueSize+1 (ADR 0028):
		// its denials are the queue being full until a computable instant.
		// A denial writes nothing and TAT only moves later with traffic;
		// retry is the first whole millisecond at any microsecond of
		// which the cost is admitted, and a larger cost needs a later
		// one. GCRA decides to the microsecond: its entries keep a 2 ms
		// margin (margin, ADR 0021).
		return true
	case AlgorithmSlidingLog:
		// A denial writes nothing; without traffic the window sum only
		// falls, at the instants its entries leave; retry is the first
		// millisecond enough of them have left, and a larger cost needs
		// more of them (ADR 0024).
		return true
	}
	return false
}
