package wiring

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/redis/go-redis/v9"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/ratecarry"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/ratedenial"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/ratefallback"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/ratelease"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/rateplan"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redisrate"
	"github.com/tech-log/tech-log-backend/app-bootstrap/config"
	"github.com/tech-log/tech-log-backend/app-bootstrap/metrics"
	"github.com/tech-log/tech-log-backend/shared-contract/keyspace"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// stack is the decorators the configuration asks for above the provider,
// in the service's order, and the port at their top.
type stack struct {
	// port is the top: the denial cache, else the fallback, else the
	// provider (uninstrumented).
	port     ratelimit.EdgePort
	fallback *ratefallback.Fallback // nil unless a policy is local-fallback
	denial   *ratedenial.Cache      // nil when the denial cache is off
	leases   *ratelease.Leaser      // nil when no policy has a lease
	plans    *rateplan.Cache        // nil when the policy file has no plans
	carrier  *ratecarry.Carrier     // nil when nothing carries (ratecarry)
	log      *slog.Logger
}

// below is what decorate stacks the decorators on: a provider, the
// client the denial cache subscribes to invalidations with, the keyspace
// the state keys come from, and the provider's policies with their
// denial-cache opt-outs. The HTTP edge's coordination gives the policy
// file's; each RLS rule generation gives its own (rls.go).
type below struct {
	provider *redisrate.Provider
	client   redis.UniversalClient
	keys     *keyspace.Builder
	log      *slog.Logger
	policies []ratelimit.Policy
	// noDenialCache lists the policies among policies whose denials are
	// never cached (the policy file's "denialCache": false).
	noDenialCache []ratelimit.PolicyID
	// plans are the policy file's plans (zero: none; the RLS's rules have
	// none), and planMetrics, optional, counts what they decide.
	plans       ratelimit.Plans
	planMetrics *metrics.Plans
	// leaseMetrics, optional, counts the leases' units (ADR 0042).
	leaseMetrics *metrics.Leases
	// predecessors maps the policies whose previous revision this
	// instance served (a reload) to it: their subjects' states carry what
	// they consumed under it (ratecarry, ADR 0039).
	predecessors map[ratelimit.PolicyID]ratelimit.Policy
	// catalog: the policies are a policy file's, recorded in and
	// succeeding the revisions of the server's catalog (ratecarry.Catalog).
	catalog bool
}

// decorate builds the decorator stack of c's provider (the policy file's
// policies): see decorate.
func (c *coordination) decorate(rl config.RateLimit, pm *metrics.Plans, lm *metrics.Leases, prev []ratelimit.Policy) (stack, error) {
	return decorate(rl, below{
		provider: c.provider, client: c.client, keys: c.keys, log: c.log,
		policies: rl.Policies.Policies, noDenialCache: rl.Policies.NoDenialCache,
		plans: rl.Policies.Plans, planMetrics: pm, leaseMetrics: lm, predecessors: predecessors(prev, rl.Policies.Policies),
		catalog: rl.PoliciesSource != "" && rl.PoliciesSource != config.PoliciesGiven,
	})
}

// predecessors maps each policy of next whose ID prev has at another
// revision to prev's (nil when none).
func predecessors(prev, next []ratelimit.Policy) map[ratelimit.PolicyID]ratelimit.Policy {
	var out map[ratelimit.PolicyID]ratelimit.Policy
	for _, p := range next {
		for _, q := range prev {
			if q.ID() == p.ID() && q.Revision() != p.Revision() {
				if out == nil {
					out = map[ratelimit.PolicyID]ratelimit.Policy{}
				}
				out[p.ID()] = q
			}
		}
	}
	return out
}

// decorate builds the decorator stack of rl over b's provider: the local
// emergency fallback when one of b's policies is local-fallback
// (fail-closed policies pass through it unchanged), then the local denial
// cache (ADR 0022) when its table is not 0, outside the fallback so that a
// pending local charge is never skipped. The metrics decorator, when there
// is one, goes on top; below it, when the file has plans, the plan
// decorator (rateplan.Port over a rateplan.Cache): the denial cache and
// the fallback see the policy a subject's plan maps a request to. It
// starts nothing: the caller starts the caches' subscriptions
// (stack.start) and closes the stack.
func decorate(rl config.RateLimit, b below) (stack, error) {
	var base ratefallback.Provider = b.provider
	var carrier *ratecarry.Carrier
	if len(b.predecessors) > 0 || b.catalog {
		var observe func(ratelimit.PolicyID, ratecarry.Result)
		if cm := b.planMetrics; cm != nil {
			observe = func(id ratelimit.PolicyID, r ratecarry.Result) { cm.Carry(id, string(r)) }
		}
		opts := ratecarry.Options{Client: b.client, Keys: b.keys, Policies: b.policies, Predecessors: b.predecessors, Observe: observe}
		if b.catalog {
			cat, err := ratecarry.NewCatalog(b.client, b.keys)
			if err != nil {
				return stack{}, fmt.Errorf("rate limit: revision catalog: %w", err)
			}
			opts.Catalog = cat
		}
		cr, err := ratecarry.New(b.provider, opts)
		if err != nil {
			return stack{}, fmt.Errorf("rate limit: carry over a new revision: %w", err)
		}
		base, carrier = cr, cr
	}
	st := stack{port: base, carrier: carrier, log: b.log}
	if hasLocalFallback(b.policies) {
		fb, err := ratefallback.New(base, ratefallback.Options{
			Policies:       b.policies,
			CommandTimeout: rl.CommandTimeout,
			MaxSubjects:    rl.FallbackMaxSubjects,
		})
		if err != nil {
			return stack{}, fmt.Errorf("rate limit: local fallback: %w", err)
		}
		st.fallback, st.port = fb, fb
	}
	if rl.DenialCacheMaxEntries > 0 {
		dc, err := ratedenial.New(st.port, ratedenial.Options{
			Policies:   b.policies,
			Disabled:   b.noDenialCache,
			Keys:       b.keys,
			MaxEntries: rl.DenialCacheMaxEntries,
			Client:     b.client,
			Log:        b.log,
		})
		if err != nil {
			st.close()
			return stack{}, fmt.Errorf("rate limit: denial cache: %w", err)
		}
		st.denial, st.port = dc, dc
	}
	if HasLease(b.policies) {
		// Above the denial cache and the fallback, below the plans: a
		// lease is of the policy that decides (ADR 0042).
		var observe func(ratelimit.PolicyID, ratelease.Event, int64)
		if lm := b.leaseMetrics; lm != nil {
			observe = func(id ratelimit.PolicyID, ev ratelease.Event, units int64) { lm.Event(id, string(ev), units) }
		}
		ls, err := ratelease.New(st.port, ratelease.Options{Policies: b.policies, Timeout: 2 * rl.CommandTimeout, Observe: observe})
		if err != nil {
			st.close()
			return stack{}, fmt.Errorf("rate limit: leases: %w", err)
		}
		st.leases, st.port = ls, ls
	}
	if !b.plans.IsZero() {
		var decided rateplan.Observer
		var observe func(rateplan.CacheEvent)
		if pm := b.planMetrics; pm != nil {
			decided = pm.Decision
			observe = func(ev rateplan.CacheEvent) { pm.Cache(string(ev)) }
		}
		pc, err := rateplan.NewCache(rateplan.CacheOptions{Client: b.client, Keys: b.keys, Log: b.log, Observe: observe})
		if err != nil {
			st.close()
			return stack{}, fmt.Errorf("rate limit: plan cache: %w", err)
		}
		port, err := rateplan.NewPort(st.port, b.plans, pc, decided)
		if err != nil {
			st.close()
			return stack{}, fmt.Errorf("rate limit: plans: %w", err)
		}
		st.plans, st.port = pc, port
	}
	return st, nil
}

// start reads and writes the revision catalog (an error is logged: the
// process then carries only what it served itself) and starts the caches'
// invalidation subscriptions (they retry by themselves).
func (st stack) start(ctx context.Context) error {
	if st.carrier != nil {
		if err := st.carrier.Start(ctx); err != nil && st.log != nil {
			st.log.Warn("rate limit: the revision catalog could not be read or written; a policy's new revision carries only what this process served before", "err", err)
		}
	}
	if st.plans != nil {
		_ = st.plans.Start(ctx)
	}
	if st.denial != nil {
		return st.denial.Start(ctx)
	}
	return nil
}

// HasLease reports whether one of policies has a lease (ADR 0042).
func HasLease(policies []ratelimit.Policy) bool {
	for _, p := range policies {
		if _, ok := p.Lease(); ok {
			return true
		}
	}
	return false
}

// hasLocalFallback reports whether one of policies is local-fallback.
func hasLocalFallback(policies []ratelimit.Policy) bool {
	for _, p := range policies {
		if p.FailurePolicy() == ratelimit.LocalFallback {
			return true
		}
	}
	return false
}

// close stops the decorators, outermost first.
func (st stack) close() {
	if st.plans != nil {
		st.plans.Close()
	}
	if st.leases != nil {
		st.leases.Close() // gives the unspent units back
	}
	if st.denial != nil {
		st.denial.Close()
	}
	if st.fallback != nil {
		st.fallback.Close()
	}
}

// Limiter is the service's distributed limiter without fx: the
// coordination provider with the service's start-up and readiness rules,
// and the decorators the configuration asks for (local fallback, denial
// cache) in the service's order. RateLimitModule builds the same pieces
// (and puts the metrics decorator on top); the front door (package
// ratelimiter) builds a Limiter. Build it with NewLimiter, call Start
// once, Close at the end.
type Limiter struct {
	c  *coordination
	st stack
}

// NewLimiter builds the limiter of rl (an enabled, validated section) over
// client, or over the service's own coordination client (CoordinationClient)
// when client is nil. A caller's client must keep the certainty rules
// (redisrate.New checks its options and names the one at fault). On error
// a caller's client is left to the caller; on success the limiter owns it.
// It does no I/O.
func NewLimiter(rl config.RateLimit, client redis.UniversalClient, log *slog.Logger) (*Limiter, error) {
	if !rl.Enabled {
		return nil, errors.New("rate limit: the configuration has the limiter disabled")
	}
	own := client == nil
	if own {
		var err error
		if client, err = coordinationClient(rl); err != nil {
			return nil, fmt.Errorf("rate limit: coordination client: %w", err)
		}
	}
	c, err := newCoordinationOver(rl, client, log)
	if err != nil {
		if own {
			_ = client.Close()
		}
		return nil, err
	}
	st, err := c.decorate(rl, nil, nil, nil)
	if err != nil {
		_ = c.provider.Close()
		return nil, err
	}
	return &Limiter{c: c, st: st}, nil
}

// Start runs the service's start-up: the server version and program
// checks (fatal only for a server that is too old, hashes the programs
// differently or is a replica; an unreachable server is logged and the
// limiter fails closed until it answers), then the plan and denial
// caches' invalidation subscriptions.
func (l *Limiter) Start(ctx context.Context) error {
	if err := l.c.start(ctx); err != nil {
		return err
	}
	return l.st.start(ctx)
}

// Ready is the service's readiness check of the limiter (/readyz):
// the start-up checks have passed (retried here) and the server answers,
// or the breaker is open with a local-fallback policy.
func (l *Limiter) Ready(ctx context.Context) error { return l.c.Ready(ctx) }

// Port is the top of the decorator stack: every evaluation, set and
// refund goes through it (the one ratelimit.EdgePort, ADR 0033).
func (l *Limiter) Port() ratelimit.EdgePort { return l.st.port }

// Provider is the redisrate provider at the bottom of the stack (stats,
// breaker state, server status).
func (l *Limiter) Provider() *redisrate.Provider { return l.c.provider }

// Fallback is the local emergency fallback, nil unless a policy is
// local-fallback.
func (l *Limiter) Fallback() *ratefallback.Fallback { return l.st.fallback }

// DenialCache is the local denial cache, nil when it is off.
func (l *Limiter) DenialCache() *ratedenial.Cache { return l.st.denial }

// Close stops the decorators and then closes the provider and its
// client, in the service's shutdown order. It is idempotent.
func (l *Limiter) Close() error {
	l.st.close()
	return l.c.provider.Close()
}
