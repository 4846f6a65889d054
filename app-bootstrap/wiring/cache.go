package wiring

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
	"go.uber.org/fx"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/rediscache"
	"github.com/tech-log/tech-log-backend/app-bootstrap/config"
	"github.com/tech-log/tech-log-backend/app-bootstrap/metrics"
	"github.com/tech-log/tech-log-backend/shared-contract/cache"
	"github.com/tech-log/tech-log-backend/shared-contract/keyspace"
)

// CacheModule provides cache.Store: the cache's own Redis client behind the
// fail-open decorator, every swallowed failure counted in
// tlb_cache_fail_open_total. It reads only cfg.Cache. Include it only when
// cfg.Cache.Enabled. The store is built at start (not on first use) so that
// a broken configuration fails start-up.
func CacheModule() fx.Option {
	return fx.Module("cache",
		fx.Provide(newCacheStore),
		fx.Invoke(func(cache.Store) {}),
	)
}

func newCacheStore(lc fx.Lifecycle, cfg config.Config, m *metrics.Metrics) (cache.Store, error) {
	c := cfg.Cache
	client, err := cacheClient(c)
	if err != nil {
		return nil, fmt.Errorf("cache: client: %w", err)
	}
	lc.Append(fx.Hook{OnStop: func(context.Context) error { return client.Close() }})
	keys, err := keyspace.NewBuilder(c.KeyPrefix, c.KeySecret)
	if err != nil {
		return nil, fmt.Errorf("cache: keyspace: %w", err)
	}
	store, err := rediscache.New(client, keys)
	if err != nil {
		return nil, fmt.Errorf("cache: store: %w", err)
	}
	failOpen, err := rediscache.NewFailOpen(store, m.CacheFailure)
	if err != nil {
		return nil, fmt.Errorf("cache: %w", err)
	}
	return failOpen, nil
}

// cacheClient builds the cache's go-redis client for its topology with
// rediscache's own constructors.
func cacheClient(c config.Cache) (redis.UniversalClient, error) {
	rc := rediscache.Config{
		Addr:           c.Redis.Addr,
		Username:       c.Redis.Username,
		Password:       c.Redis.Password.Reveal(),
		DB:             c.DB,
		TLSConfig:      c.Redis.TLSConfig(),
		DialTimeout:    c.DialTimeout,
		CommandTimeout: c.CommandTimeout,
		PoolSize:       c.PoolSize,
		PoolTimeout:    c.PoolTimeout,
	}
	top := rc
	top.Addr = ""
	t := c.Topology
	return byTopology(t, constructors{
		standalone: func() (redis.UniversalClient, error) { return universal(rediscache.NewClient(rc)) },
		sentinel: func() (redis.UniversalClient, error) {
			return universal(rediscache.NewFailoverClient(top, t.MasterName, t.Addrs, t.SentinelUsername, t.SentinelPassword.Reveal()))
		},
		cluster: func() (redis.UniversalClient, error) { return universal(rediscache.NewClusterClient(top, t.Addrs)) },
	})
}
