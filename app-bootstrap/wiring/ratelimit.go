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

// RateLimitModule is the distributed limiter: it provides *Policies (the
// policy file's generations, reloaded without a restart: the web edge
// serves through Policies.Handler), ratelimit.EdgePort (the serving
// generation's instrumented redisrate Provider) and a readiness check.
// Include it only when cfg.RateLimit.Enabled. The raw Provider is private
// to the module, so nothing can bypass the metrics decorator.
func RateLimitModule() fx.Option {
	return fx.Module("ratelimit",
		fx.Provide(newPolicies),
		fx.Provide(fx.Annotate(newEdgePort, fx.As(new(ratelimit.EdgePort)))),
		fx.Provide(fx.Annotate(newCoordinationReadiness, fx.ResultTags(`group:"readiness"`))),
	)
}

// coordination is one Provider and its start-up checks (start: the version
// and script checks, run by its policy generation's start); its
// generation closes the provider and with it the client. A transport
// failure at start does not stop the service (it serves fail-closed and is
// not ready); Ready retries the checks until they pass.
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

func newEdgePort(p *Policies, m *metrics.Metrics, cfg config.Config) ratelimit.EdgePort {
	cur := func() *coordination { return p.current().c }
	m.RegisterBreaker(func() string { return string(cur().provider.BreakerState()) }, func() uint64 { return cur().provider.BreakerTrips() })
	m.RegisterTargetBreakers(func() []metrics.TargetBreaker {
		var out []metrics.TargetBreaker
		for _, tb := range cur().provider.BreakerTargets() {
			out = append(out, metrics.TargetBreaker{Target: tb.Target, State: string(tb.State)})
		}
		return out
	})
	m.RegisterDedupRetries(
		func() uint64 { d, _ := cur().provider.DedupRetries(); return d },
		func() uint64 { _, f := cur().provider.DedupRetries(); return f })
	m.RegisterDedupRetryFailures(func() []metrics.DedupRetryFailure {
		var out []metrics.DedupRetryFailure
		for f, n := range cur().provider.DedupRetryFailures() {
			out = append(out, metrics.DedupRetryFailure{Kind: string(f.Kind), Category: string(f.Category), Count: n})
		}
		return out
	})
	m.RegisterPipeline(func() (int64, int64, int) {
		st := cur().provider.PipelineStats()
		return st.Batches, st.Calls, st.Queued
	})
	// The fallback's and denial cache's series exist when the start-up
	// generation has them (the denial cache follows a variable, so every
	// generation has it or none does); they read the serving generation's,
	// zero while it has none.
	if p.current().st.fallback != nil {
		m.RegisterFallback(func() metrics.FallbackStats {
			fb := p.current().st.fallback
			if fb == nil {
				return metrics.FallbackStats{Pending: map[string]int64{}}
			}
			st := fb.Stats()
			pending := make(map[string]int64, len(st.Pending))
			for id, n := range st.Pending {
				pending[string(id)] = n
			}
			return metrics.FallbackStats{Pending: pending, Subjects: st.Subjects, MaxSubjects: st.MaxSubjects, Dropped: st.Dropped, ChargeFailures: st.ChargeFailures}
		})
	}
	if p.current().st.denial != nil {
		m.RegisterDenialCache(func() metrics.DenialCacheStats {
			st := p.current().st.denial.Stats()
			return metrics.DenialCacheStats{Hits: st.Hits, Invalidations: st.Invalidations, Evicted: st.Evicted, Entries: st.Entries, MaxEntries: st.MaxEntries, Live: st.Live}
		})
	}
	m.SetMaxInFlight(cfg.RateLimit.MaxInFlight)
	m.RegisterServerStatus(func() (metrics.ServerGauges, bool) { return cur().serverGauges() })
	return generationPort{p}
}

// generationPort is the EdgePort of the serving generation, for callers
// outside the web edge: each call runs on the generation current when it
// starts. A refund's receipt from an earlier generation is refunded
// through the current one (a receipt carries its policy's revision, so a
// receipt of a changed policy refunds nothing).
type generationPort struct{ p *Policies }

var _ ratelimit.EdgePort = generationPort{}

// Evaluate implements ratelimit.EdgePort.
func (gp generationPort) Evaluate(ctx context.Context, req ratelimit.Request) ratelimit.Outcome {
	g := gp.p.acquire()
	defer g.mu.RUnlock()
	return g.edge.Evaluate(ctx, req)
}

// EvaluateSet implements ratelimit.EdgePort.
func (gp generationPort) EvaluateSet(ctx context.Context, req ratelimit.SetRequest) ratelimit.Outcome {
	g := gp.p.acquire()
	defer g.mu.RUnlock()
	return g.edge.EvaluateSet(ctx, req)
}

// Refund implements ratelimit.EdgePort.
func (gp generationPort) Refund(ctx context.Context, req ratelimit.Request, r ratelimit.Receipt) ratelimit.Outcome {
	g := gp.p.acquire()
	defer g.mu.RUnlock()
	return g.edge.Refund(ctx, req, r)
}

func newCoordinationReadiness(p *Policies) ReadinessCheck {
	cur := func() *coordination { return p.current().c }
	return ReadinessCheck{
		Name:     "ratelimit",
		Check:    func(ctx context.Context) error { return cur().Ready(ctx) },
		Server:   func() (ServerDetail, bool) { return cur().serverDetail() },
		Breakers: func() []BreakerDetail { return cur().breakerDetail() },
	}
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
