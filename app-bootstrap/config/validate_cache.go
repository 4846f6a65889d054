package config

func (v *errs) cache(c rawCache) Cache {
	const g = envCacheGroup + "REDIS_"
	if !c.Enabled {
		return Cache{}
	}
	r := c.Redis
	return Cache{
		Enabled:        true,
		Redis:          v.redis(g, r.Conn),
		KeyPrefix:      v.keyPrefix(g+"KEY_PREFIX", r.KeyPrefix),
		KeySecret:      v.keySecret(g+"KEY_SECRET", r.KeySecret, r.KeySecretFile),
		DB:             v.between(g+"DB", r.DB, 0, maxDB),
		CommandTimeout: v.duration(g+"COMMAND_TIMEOUT", r.CommandTimeout, maxCacheTimeout),
		DialTimeout:    v.duration(g+"DIAL_TIMEOUT", r.DialTimeout, maxCacheTimeout),
		PoolTimeout:    v.duration(g+"POOL_TIMEOUT", r.PoolTimeout, maxCacheTimeout),
		PoolSize:       v.bound(g+"POOL_SIZE", r.PoolSize, maxCachePool),
	}
}
