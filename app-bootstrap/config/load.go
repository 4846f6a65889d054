package config

import (
	"time"

	"github.com/tech-log/tech-log-backend/adapter-inbound-web/edge"
	"github.com/tech-log/tech-log-backend/adapter-inbound-web/localimit"
	"github.com/tech-log/tech-log-backend/adapter-inbound-web/subject"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/rediscache"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redisrate"
)

// Bounds on numeric settings. A value outside them is a configuration
// mistake, not a tuning choice. Where an adapter validates the same value,
// its exported bound is used, so that start-up rejects exactly what the
// adapter would; the others are this package's own.
const (
	// maxRateLimitTimeout bounds the coordination client's timeouts.
	maxRateLimitTimeout = redisrate.MaxTimeout
	// maxRateLimitPool bounds the coordination pool (and so MaxInFlight).
	maxRateLimitPool = redisrate.MaxPoolSize
	// maxCacheTimeout and maxCachePool are the cache client's bounds.
	maxCacheTimeout = rediscache.MaxTimeout
	maxCachePool    = rediscache.MaxPoolSize
	// maxWebTimeout bounds the per-evaluation deadline the edge accepts.
	maxWebTimeout  = edge.MaxTimeout
	maxProxies     = subject.MaxTrustedProxies
	maxLocalBurst  = localimit.MaxBurst
	maxLocalClient = localimit.MaxClientsLimit

	maxShutdown  = 10 * time.Minute
	maxDB        = 15
	maxLocalRate = 1e9
	maxIdleTTL   = 24 * time.Hour
)

// Supported values of the selection variables in v1.
const (
	ProviderRedis     = "redis"
	RoleCoordination  = "coordination"
	FailClosedPolicy  = "fail-closed"
	EmbeddedPolicies  = "embedded:default-policies.json"
	envRateLimitGroup = Prefix + "RATE_LIMIT_"
	envCacheGroup     = Prefix + "CACHE_"
	envWebGroup       = Prefix + "WEB_"
)

// Load parses and validates the APP_ variables in environ. On failure it
// returns every problem found, joined, each a *VarError naming its variable
// (see VarErrors). Files named by _FILE variables and the policy file are
// read; nothing else is touched.
func Load(environ map[string]string) (Config, error) {
	var raw rawConfig
	if err := parseEnv(&raw, environ); err != nil {
		return Config{}, err
	}
	v := &errs{}
	cfg := Config{}
	cfg.RateLimit = v.rateLimit(raw.RateLimit)
	cfg.Cache = v.cache(raw.Cache)
	cfg.Web = v.web(raw.Web, cfg.RateLimit)
	cfg.Log = v.log(raw.LogFormat, raw.LogLevel)
	cfg.ShutdownTimeout = v.duration(Prefix+"SHUTDOWN_TIMEOUT", raw.ShutdownTimeout, maxShutdown)
	if cfg.RateLimit.Enabled && cfg.Cache.Enabled && !cfg.RateLimit.AllowSharedRedis &&
		sameEndpoint(cfg.RateLimit.Redis.Addr, cfg.Cache.Redis.Addr) {
		v.add(envRateLimitGroup+"REDIS_ADDR", ErrSharedRedis,
			"%s is also %sREDIS_ADDR; coordination needs its own redis (set %sALLOW_SHARED_REDIS=true to accept the shared server)",
			cfg.RateLimit.Redis.Addr, envCacheGroup, envRateLimitGroup)
	}
	if err := v.err(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}
