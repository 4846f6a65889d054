package config

import (
	"net"
	"time"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// Bounds on numeric settings. A value outside them is a configuration
// mistake, not a tuning choice. config imports no adapter (ADR 0036), so
// where an adapter's constructor checks the same value this package states
// the adapter's bound again, and app-bootstrap/wiring's TestConfigBounds
// pins each one equal to the adapter's exported constant: start-up rejects
// exactly what the adapter would, naming the APP_ variable. The others are
// this package's own.
const (
	// MaxRateLimitTimeout bounds the coordination client's timeouts
	// (redisrate.MaxTimeout).
	MaxRateLimitTimeout = 10 * time.Second
	// MaxRateLimitPool bounds the coordination pool, and so MaxInFlight and
	// PipelineMaxBatch (redisrate.MaxPoolSize).
	MaxRateLimitPool = 1024
	// MaxBreakerThreshold, MinProbeInterval and MaxProbeInterval bound the
	// coordination breaker (redisrate's of the same names).
	MaxBreakerThreshold = 1000
	MinProbeInterval    = 10 * time.Millisecond
	MaxProbeInterval    = time.Minute
	// MaxReplicationAcks bounds APP_RATE_LIMIT_REPLICATION_ACKS
	// (redisrate.MaxReplicationAcks).
	MaxReplicationAcks = 16
	// MaxFallbackSubjects bounds APP_RATE_LIMIT_FALLBACK_MAX_SUBJECTS
	// (ratefallback.MaxSubjects).
	MaxFallbackSubjects = 1_000_000
	// MaxCacheTimeout and MaxCachePool are the cache client's bounds
	// (rediscache.MaxTimeout, rediscache.MaxPoolSize).
	MaxCacheTimeout = 10 * time.Second
	MaxCachePool    = 1024
	// MaxTrustedProxies and MinIPv6Prefix bound the identity settings
	// (subject.MaxTrustedProxies, subject.MinIPv6PrefixLen).
	MaxTrustedProxies = 256
	MinIPv6Prefix     = 32
	// MaxLocalBurst and MaxLocalClients bound the edge's local limiter
	// (localimit.MaxBurst, localimit.MaxClientsLimit).
	MaxLocalBurst   = 1_000_000_000
	MaxLocalClients = 10_000_000

	// maxWebTimeout bounds the per-evaluation deadline the edge accepts.
	maxWebTimeout = ratelimit.MaxEvaluationTimeout

	maxShutdown  = 10 * time.Minute
	maxDB        = 15
	maxLocalRate = 1e9
	maxIdleTTL   = 24 * time.Hour
)

// Derived defaults of APP_WEB_EVALUATION_TIMEOUT: with the Redis limiter
// on, EvaluationTimeoutFactor times APP_RATE_LIMIT_COMMAND_TIMEOUT (500ms
// for the default 250ms; when a policy has a dedup window
// DedupEvaluationTimeoutFactor times it, 750ms, room for the retry of a
// lost reply), otherwise DefaultEvaluationTimeout. The factors are
// redisrate's (its EvaluationTimeout), pinned by wiring's TestConfigBounds.
const (
	EvaluationTimeoutFactor      = 2
	DedupEvaluationTimeoutFactor = 3
	DefaultEvaluationTimeout     = 500 * time.Millisecond
)

// derivedEvaluationTimeout is the derived APP_WEB_EVALUATION_TIMEOUT for a
// command timeout, with or without a dedup window among the policies.
func derivedEvaluationTimeout(command time.Duration, dedup bool) time.Duration {
	if dedup {
		return DedupEvaluationTimeoutFactor * command
	}
	return EvaluationTimeoutFactor * command
}

// Compile-time proof that the derived evaluation timeout is within the
// edge's bound for every accepted command timeout.
const _ = uint64(maxWebTimeout - DedupEvaluationTimeoutFactor*MaxRateLimitTimeout)

// Supported values of the selection variables in v1.
const (
	ProviderRedis     = "redis"
	RoleCoordination  = "coordination"
	FailClosedPolicy  = "fail-closed"
	envRateLimitGroup = Prefix + "RATE_LIMIT_"
	envCacheGroup     = Prefix + "CACHE_"
	envWebGroup       = Prefix + "WEB_"
)

// Load parses and validates the APP_ variables in environ. On failure it
// returns every problem found, joined, each a *VarError naming its variable
// (see VarErrors). Files named by _FILE variables and the policy file are
// read, and host names in the two Redis addresses may be resolved (the
// dedicated-endpoint check); nothing else is touched.
func Load(environ map[string]string) (Config, error) {
	return load(environ, net.DefaultResolver.LookupHost)
}

// PoliciesGiven is the RateLimit.PoliciesSource of a configuration loaded
// by LoadWith.
const PoliciesGiven = "the given policies"

// LoadWith is Load with the policies given (built by NewPolicySet)
// instead of read from APP_RATE_LIMIT_POLICIES_FILE, which must then be
// unset: every other variable is read, defaulted and validated as Load
// does, APP_RATE_LIMIT_DEFAULT_POLICY included (against the given set).
// The front door (package ratelimiter) loads its options here.
func LoadWith(environ map[string]string, policies PolicySet) (Config, error) {
	return loadWith(environ, &policies, net.DefaultResolver.LookupHost)
}

// load is Load with the resolver of the dedicated-endpoint check.
func load(environ map[string]string, lookup lookupFunc) (Config, error) {
	return loadWith(environ, nil, lookup)
}

// loadWith is load with the given policies, if any.
func loadWith(environ map[string]string, given *PolicySet, lookup lookupFunc) (Config, error) {
	var raw rawConfig
	if err := parseEnv(&raw, environ); err != nil {
		return Config{}, err
	}
	v := &errs{}
	cfg := Config{}
	cfg.RateLimit = v.rateLimit(raw.RateLimit, given)
	cfg.Cache = v.cache(raw.Cache)
	cfg.Web = v.web(raw.Web, cfg.RateLimit)
	cfg.RLS = v.rls(raw.RLS, cfg.RateLimit, raw.Web)
	cfg.Log = v.log(raw.LogFormat, raw.LogLevel)
	cfg.ShutdownTimeout = v.duration(Prefix+"SHUTDOWN_TIMEOUT", raw.ShutdownTimeout, maxShutdown)
	// The coordination endpoint is dedicated: it must not reach the cache's
	// server, whether or not the cache is enabled (a configured cache
	// address names a server the deployment uses as a cache).
	cacheAddr := raw.Cache.Redis.Conn.Addr
	if rl := cfg.RateLimit; rl.Enabled && !rl.AllowSharedRedis && rl.Redis.Addr != "" && cacheAddr != "" &&
		sameEndpoint(rl.Redis.Addr, cacheAddr, lookup) {
		v.add(envRateLimitGroup+"REDIS_ADDR", ErrSharedRedis,
			"%s reaches the same server as %sREDIS_ADDR (%s); coordination needs its own redis (set %sALLOW_SHARED_REDIS=true to accept the shared server)",
			bounded(rl.Redis.Addr), envCacheGroup, bounded(cacheAddr), envRateLimitGroup)
	}
	if rl := cfg.RateLimit; rl.Enabled && !rl.AllowSharedRedis && rl.Topology.Mode == ModeCluster && cacheAddr != "" {
		for _, a := range rl.Topology.Addrs {
			if sameEndpoint(a, cacheAddr, lookup) {
				v.add(envRateLimitGroup+"REDIS_ADDRS", ErrSharedRedis,
					"%s reaches the same server as %sREDIS_ADDR (%s); coordination needs its own redis (set %sALLOW_SHARED_REDIS=true to accept the shared server)",
					bounded(a), envCacheGroup, bounded(cacheAddr), envRateLimitGroup)
			}
		}
	}
	if err := v.err(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}
