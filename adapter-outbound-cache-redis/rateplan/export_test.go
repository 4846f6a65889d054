package rateplan

// CacheGen is c's generation (Cache.gen), for the test of a read that an
// invalidation crosses: it moves with every invalidation heard and every
// change of the subscription.
func CacheGen(c *Cache) uint64 { return c.gen.Load() }
