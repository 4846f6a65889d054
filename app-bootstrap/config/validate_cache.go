package config

func (v *errs) cache(c rawCache) Cache {
	const g = envCacheGroup + "REDIS_"
	if !c.Enabled {
		return Cache{}
	}
	r := c.Redis
	top := v.topologyIn(envCacheGroup, c.Topology, r.Conn.Addr)
	if top.Mode == ModeCluster && r.DB != 0 {
		v.add(g+"DB", ErrConflict, "%d: a cluster has database 0 only (%sREDIS_MODE=cluster)", r.DB, envCacheGroup)
	}
	return Cache{
		Enabled:        true,
		Topology:       top,
		Redis:          v.redisFor(g, r.Conn, top),
		KeyPrefix:      v.keyPrefix(g+"KEY_PREFIX", r.KeyPrefix),
		KeySecret:      v.keySecret(g+"KEY_SECRET", r.KeySecret, r.KeySecretFile),
		DB:             v.between(g+"DB", r.DB, 0, maxDB),
		CommandTimeout: v.duration(g+"COMMAND_TIMEOUT", r.CommandTimeout, MaxCacheTimeout),
		DialTimeout:    v.duration(g+"DIAL_TIMEOUT", r.DialTimeout, MaxCacheTimeout),
		PoolTimeout:    v.duration(g+"POOL_TIMEOUT", r.PoolTimeout, MaxCacheTimeout),
		PoolSize:       v.bound(g+"POOL_SIZE", r.PoolSize, MaxCachePool),
	}
}
