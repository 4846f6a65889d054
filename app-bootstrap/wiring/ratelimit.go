package wiring

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/redis/go-redis/v9"
	"go.uber.org/fx"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redisrate"
	"github.com/tech-log/tech-log-backend/app-bootstrap/config"
	"github.com/tech-log/tech-log-backend/app-bootstrap/metrics"
	"github.com/tech-log/tech-log-backend/shared-contract/keyspace"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// CoordinationClientName is the CLIENT SETNAME of coordination connections,
// so that an operator can tell them from the cache's.
const CoordinationClientName = "tlb-coordination"

// RateLimitModule is the distributed limiter: it provides
// ratelimit.EdgePort (the instrumented redisrate Provider) and a readiness
// check. Include it only when cfg.RateLimit.Enabled. The raw Provider is
// private to the module, so nothing can bypass the metrics decorator.
func RateLimitModule() fx.Option {
	return fx.Module("ratelimit",
		fx.Provide(fx.Private, newCoordination),
		fx.Provide(fx.Annotate(newEdgePort, fx.As(new(ratelimit.EdgePort)))),
		fx.Provide(fx.Annotate(newCoordinationReadiness, fx.ResultTags(`group:"readiness"`))),
	)
}

// coordination owns the Provider's lifecycle: OnStart runs the version and
// script checks, OnStop closes the client. A transport failure at start does
// not stop the service (it serves fail-closed and is not ready); Ready
// retries the checks until they pass.
type coordination struct {
	provider *redisrate.Provider
	// client is the provider's client; the denial cache subscribes to
	// invalidations with it.
	client redis.UniversalClient
	keys   *keyspace.Builder
	log    *slog.Logger
	redis  config.Redis // for naming the variable at fault in errors

	// fallback: some policy is local-fallback, so an open breaker keeps
	// the instance ready.
	fallback bool

	mu      sync.Mutex
	started bool
}

func newCoordination(lc fx.Lifecycle, cfg config.Config, log *slog.Logger) (*coordination, error) {
	client, err := coordinationClient(cfg.RateLimit)
	if err != nil {
		return nil, fmt.Errorf("rate limit: coordination client: %w", err)
	}
	c, err := newCoordinationOver(cfg.RateLimit, client, log)
	if err != nil {
		_ = client.Close()
		return nil, err
	}
	lc.Append(fx.Hook{
		OnStart: c.start,
		OnStop:  func(context.Context) error { return c.provider.Close() },
	})
	return c, nil
}

// providerOptions are the provider's options from the configuration: one
// place for the service's provider and every RLS generation's.
func providerOptions(rl config.RateLimit) redisrate.Options {
	return redisrate.Options{
		CommandTimeout:        rl.CommandTimeout,
		MaxInFlight:           rl.MaxInFlight,
		PipelineMaxBatch:      rl.PipelineMaxBatch,
		Breaker:               redisrate.BreakerOptions{Threshold: rl.BreakerThreshold, ProbeInterval: rl.BreakerProbeInterval},
		ReplicationAcks:       rl.ReplicationAcks,
		ReplicationAckTimeout: rl.ReplicationAckTimeout,
		ServerChecks:          &redisrate.ServerChecks{AllowEviction: rl.AllowEviction, SkipConfig: rl.SkipServerConfigCheck},
	}
}

// newCoordinationOver builds the provider of rl over client (the service's
// own, or a front-door caller's, checked by redisrate.New). On error
// client is left to the caller; on success the provider owns it.
func newCoordinationOver(rl config.RateLimit, client redis.UniversalClient, log *slog.Logger) (*coordination, error) {
	keys, err := keyspace.NewBuilder(rl.KeyPrefix, rl.KeySecret)
	if err != nil {
		return nil, fmt.Errorf("rate limit: keyspace: %w", err)
	}
	provider, err := redisrate.New(client, keys, rl.Policies.Policies, providerOptions(rl))
	if err != nil {
		return nil, fmt.Errorf("rate limit: provider: %w", err)
	}
	c := &coordination{provider: provider, client: client, keys: keys, log: log.With("component", "ratelimit"), redis: rl.Redis}
	c.fallback = hasLocalFallback(rl.Policies.Policies)
	provider.OnBreakerChange(func(s redisrate.BreakerState) {
		if s == redisrate.BreakerOpen {
			c.log.Warn("circuit breaker open: coordination redis unreachable; limited routes answer 503 (circuit_open) at once, probing in the background", "probe_interval", rl.BreakerProbeInterval)
			return
		}
		c.log.Info("circuit breaker closed: coordination redis answers again")
	})
	return c, nil
}

// start runs Provider.Start. A server that is too old or hashes the programs
// differently is fatal: nothing it answers could be trusted. A server that
// cannot be reached is not: the limiter fails closed (503) until it can.
func (c *coordination) start(ctx context.Context) error {
	err := c.check(ctx)
	switch {
	case err == nil:
		c.log.Info("coordination redis checked: version and programs ok")
		c.warnServerPolicy()
		return nil
	case fatalStartError(err):
		return fmt.Errorf("rate limit: %w", err)
	default:
		c.log.Warn("coordination redis unreachable at start; limited routes answer 503 until it is", "err", err)
		return nil
	}
}

func fatalStartError(err error) bool {
	return errors.Is(err, redisrate.ErrServerVersion) || errors.Is(err, redisrate.ErrScriptDigest) ||
		errors.Is(err, redisrate.ErrReplica)
}

// check runs Provider.Start once it has not yet succeeded. A connection
// failure comes back as a *ConnError when a variable explains it.
func (c *coordination) check(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.started {
		return nil
	}
	if err := c.provider.Start(ctx); err != nil {
		return explainServerPolicy(ExplainConnError(config.Prefix+"RATE_LIMIT_REDIS_", c.redis, err))
	}
	c.started = true
	return nil
}

// Ready implements the readiness check: the start-up checks have passed
// (retried here if they could not run at start) and the server answers PING
// within the command timeout.
func (c *coordination) Ready(ctx context.Context) error {
	if s := c.provider.BreakerState(); s == redisrate.BreakerOpen || s == redisrate.BreakerHalfOpen {
		// No PING: the breaker's prober is the only traffic while open.
		if c.fallback {
			// Local-fallback policies are decided here meanwhile: the
			// instance stays in the load balancer (docs/degraded-mode.md).
			return nil
		}
		return errBreakerOpen
	}
	if err := c.check(ctx); err != nil {
		return err
	}
	return explainServerPolicy(ExplainConnError(config.Prefix+"RATE_LIMIT_REDIS_", c.redis, c.provider.Ready(ctx)))
}

// breakerOpenError is the readiness error while the circuit breaker is
// open; its detail is safe to show on /readyz.
type breakerOpenError struct{}

func (breakerOpenError) Error() string { return "rate limit: circuit breaker open" }

// ReadinessDetail implements health's public detail.
func (breakerOpenError) ReadinessDetail() string {
	return "rate limit: circuit breaker open (coordination redis unreachable, probing)"
}

var errBreakerOpen error = breakerOpenError{}

func newEdgePort(lc fx.Lifecycle, c *coordination, m *metrics.Metrics, cfg config.Config) (*metrics.Edge, error) {
	m.RegisterBreaker(func() string { return string(c.provider.BreakerState()) }, c.provider.BreakerTrips)
	m.RegisterTargetBreakers(func() []metrics.TargetBreaker {
		var out []metrics.TargetBreaker
		for _, tb := range c.provider.BreakerTargets() {
			out = append(out, metrics.TargetBreaker{Target: tb.Target, State: string(tb.State)})
		}
		return out
	})
	m.RegisterDedupRetries(
		func() uint64 { d, _ := c.provider.DedupRetries(); return d },
		func() uint64 { _, f := c.provider.DedupRetries(); return f })
	m.RegisterDedupRetryFailures(func() []metrics.DedupRetryFailure {
		var out []metrics.DedupRetryFailure
		for f, n := range c.provider.DedupRetryFailures() {
			out = append(out, metrics.DedupRetryFailure{Kind: string(f.Kind), Category: string(f.Category), Count: n})
		}
		return out
	})
	m.RegisterPipeline(func() (int64, int64, int) {
		st := c.provider.PipelineStats()
		return st.Batches, st.Calls, st.Queued
	})
	st, err := c.decorate(cfg.RateLimit)
	if err != nil {
		return nil, err
	}
	if fb := st.fallback; fb != nil {
		// Stops the background reconciliation before the provider
		// closes (hooks stop in reverse order).
		lc.Append(fx.Hook{OnStop: func(context.Context) error { fb.Close(); return nil }})
		m.RegisterFallback(func() metrics.FallbackStats {
			st := fb.Stats()
			pending := make(map[string]int64, len(st.Pending))
			for id, n := range st.Pending {
				pending[string(id)] = n
			}
			return metrics.FallbackStats{Pending: pending, Subjects: st.Subjects, MaxSubjects: st.MaxSubjects, Dropped: st.Dropped, ChargeFailures: st.ChargeFailures}
		})
	}
	if dc := st.denial; dc != nil {
		// Subscribes to invalidations at start; stops the subscription
		// before the provider closes the client (hooks stop in reverse
		// order).
		lc.Append(fx.Hook{OnStart: dc.Start, OnStop: func(context.Context) error { dc.Close(); return nil }})
		m.RegisterDenialCache(func() metrics.DenialCacheStats {
			st := dc.Stats()
			return metrics.DenialCacheStats{Hits: st.Hits, Invalidations: st.Invalidations, Evicted: st.Evicted, Entries: st.Entries, MaxEntries: st.MaxEntries, Live: st.Live}
		})
	}
	port := st.port
	ids := make([]ratelimit.PolicyID, 0, len(cfg.RateLimit.Policies.Policies))
	for _, p := range cfg.RateLimit.Policies.Policies {
		ids = append(ids, p.ID())
	}
	m.SetMaxInFlight(cfg.RateLimit.MaxInFlight)
	m.RegisterServerStatus(c.serverGauges)
	return m.InstrumentEdge(port, ids).CountShadow(cfg.RateLimit.Policies.Policies), nil
}

func newCoordinationReadiness(c *coordination) ReadinessCheck {
	return ReadinessCheck{Name: "ratelimit", Check: c.Ready, Server: c.serverDetail, Breakers: c.breakerDetail}
}

// coordinationClient is the service's coordination client
// (CoordinationClient named CoordinationClientName).
func coordinationClient(rl config.RateLimit) (redis.UniversalClient, error) {
	return CoordinationClient(rl, CoordinationClientName)
}

// CoordinationClient builds the go-redis client of rl's topology
// (standalone, sentinel or cluster) with redisrate's own constructors: the
// same fixed options in every mode, the endpoint, credentials, TLS,
// timeouts and pool size of rl, and clientName as CLIENT SETNAME. The
// service and tlbctl (with its own credentials and timeouts in rl) both
// build their client here. It does no I/O.
func CoordinationClient(rl config.RateLimit, clientName string) (redis.UniversalClient, error) {
	cc := redisrate.ClientConfig{
		Addr:           rl.Redis.Addr,
		Username:       rl.Redis.Username,
		Password:       rl.Redis.Password.Reveal(),
		TLSConfig:      rl.Redis.TLSConfig(),
		Protocol:       redisrate.ProtocolRESP2,
		CommandTimeout: rl.CommandTimeout,
		DialTimeout:    rl.DialTimeout,
		PoolSize:       rl.PoolSize,
		PoolTimeout:    rl.PoolTimeout,
		ClientName:     clientName,
	}
	top := cc
	top.Addr = ""
	t := rl.Topology
	return byTopology(t, constructors{
		standalone: func() (redis.UniversalClient, error) { return universal(redisrate.NewClient(cc)) },
		sentinel: func() (redis.UniversalClient, error) {
			return universal(redisrate.NewFailoverClient(top, redisrate.SentinelConfig{
				MasterName: t.MasterName,
				Addrs:      t.Addrs,
				Username:   t.SentinelUsername,
				Password:   t.SentinelPassword.Reveal(),
			}))
		},
		cluster: func() (redis.UniversalClient, error) { return universal(redisrate.NewClusterClient(top, t.Addrs)) },
	})
}
