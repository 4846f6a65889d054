package ratelimit

// MaxDenialCacheEntries bounds the local denial cache's table (the
// adapter's Options.MaxEntries, the configuration's
// APP_RATE_LIMIT_DENIAL_CACHE_MAX_ENTRIES).
const MaxDenialCacheEntries = 1_000_000

// DenialCacheExact reports whether a local denial cache is exact for
// algorithm a: with no other traffic and no reset, a request the server
// denied with retry-after R stays denied, for that cost and every larger
// one, at every instant before R has passed on the server's clock. The rule
// and its reason are the algorithm's (AlgorithmSpec.DenialCacheExact in its
// alg_<name>.go; docs/programs.md, "Denial cache"): the cache
// (ratedenial.Exact) and the policy file's check of "denialCache" both ask
// it; an unknown algorithm is never cached.
func DenialCacheExact(a Algorithm) bool {
	s, ok := a.Spec()
	return ok && s.DenialCacheExact
}
