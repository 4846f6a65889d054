package ratelimiter

import (
	"time"

	"github.com/tech-log/tech-log-backend/app-bootstrap/config"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// The defaults of every policy field but the rate, as in the example
// policy file (app-bootstrap/examples/policies.json, the service's
// embedded DefaultPoliciesJSON): revision 1, a minute of cleanup grace,
// 2 s of tolerated server-clock regression, fail closed. MaxCost defaults
// to the limit (the burst, capacity or window limit), so that AllowN may
// take up to a full bucket, as redis_rate's AllowN may.
const (
	DefaultRevision           = 1
	DefaultCleanupGrace       = time.Minute
	DefaultMaxClockRegression = 2 * time.Second
)

// Policies are the policies of a limiter by ID (see ratelimit.PolicyID for
// the syntax: [a-z0-9][a-z0-9._-]{0,63}).
type Policies map[string]Limit

// Limit is one policy without its ID: the algorithm and its rate, from a
// helper (PerSecond, GCRA, TokenBucket, ...), and every other field at its
// default until a With method changes it. It is a value; With methods
// return a changed copy. The zero value is invalid (New names it).
type Limit struct {
	spec        ratelimit.PolicySpec
	maxCost     bool // spec.MaxCost was set by WithMaxCost
	routes      []string
	denialCache *bool
}

func newLimit(alg ratelimit.Algorithm, params ratelimit.Params) Limit {
	return Limit{spec: ratelimit.PolicySpec{
		Revision: DefaultRevision, Algorithm: alg, Params: params,
		CleanupGrace: DefaultCleanupGrace, MaxClockRegression: DefaultMaxClockRegression,
		FailurePolicy: ratelimit.FailClosed,
	}}
}

// PerSecond is redis_rate.PerSecond: rate requests per second, at most
// rate at once (GCRA(rate, time.Second, rate)).
func PerSecond(rate int64) Limit { return GCRA(rate, time.Second, rate) }

// PerMinute is redis_rate.PerMinute: GCRA(rate, time.Minute, rate).
func PerMinute(rate int64) Limit { return GCRA(rate, time.Minute, rate) }

// PerHour is redis_rate.PerHour: GCRA(rate, time.Hour, rate).
func PerHour(rate int64) Limit { return GCRA(rate, time.Hour, rate) }

// GCRA admits rate requests per period on average and at most burst at
// once: redis_rate.Limit{Rate: rate, Burst: burst, Period: period}, exactly
// (ADR 0021).
func GCRA(rate int64, period time.Duration, burst int64) Limit {
	return newLimit(ratelimit.AlgorithmGCRA, ratelimit.GCRA{Rate: rate, Period: period, Burst: burst})
}

// TokenBucket holds capacity tokens, starts full and gains refill tokens
// every period.
func TokenBucket(capacity, refill int64, period time.Duration) Limit {
	return newLimit(ratelimit.AlgorithmTokenBucket, ratelimit.TokenBucket{Capacity: capacity, RefillTokens: refill, RefillPeriod: period})
}

// FixedWindow admits limit requests per aligned window.
func FixedWindow(limit int64, window time.Duration) Limit {
	return newLimit(ratelimit.AlgorithmFixedWindow, ratelimit.FixedWindow{Limit: limit, Window: window})
}

// SlidingWindow admits about limit requests per sliding window (the
// sliding-window counter: approximate, conservative).
func SlidingWindow(limit int64, window time.Duration) Limit {
	return newLimit(ratelimit.AlgorithmSlidingWindowCounter, ratelimit.SlidingWindowCounter{Limit: limit, Window: window})
}

// SlidingLog admits limit requests in any window of the given length,
// exactly (at most ratelimit.MaxSlidingLogLimit; ADR 0024).
func SlidingLog(limit int64, window time.Duration) Limit {
	return newLimit(ratelimit.AlgorithmSlidingLog, ratelimit.SlidingLog{Limit: limit, Window: window})
}

// LeakyBucket is a queue (ADR 0028): requests leave at rate per period; up
// to queueSize wait, each admitted with Decision.Delay, the wait until its
// slot; beyond that they are denied. MaxDelay is the queue's longest delay
// (config.MaxQueueDelay at most).
func LeakyBucket(rate int64, period time.Duration, queueSize int64) Limit {
	q := ratelimit.LeakyBucket{Rate: rate, Period: period, QueueSize: queueSize}
	q.MaxDelay = q.LongestDelay()
	return newLimit(ratelimit.AlgorithmLeakyBucket, q)
}

// FromPolicy is p as a Limit, every field kept (its ID is replaced by the
// key it is given under in Policies).
func FromPolicy(p ratelimit.Policy) Limit {
	replays := p.DedupMaxReplays()
	spec := ratelimit.PolicySpec{
		Revision: p.Revision(), Algorithm: p.Algorithm(), Params: p.Params(), MaxCost: p.MaxCost(),
		CleanupGrace: p.CleanupGrace(), MaxClockRegression: p.MaxClockRegression(),
		FailurePolicy: p.FailurePolicy(), FallbackInstances: p.FallbackInstances(),
		DedupWindow: p.DedupWindow(), Scope: p.Scope(), Enforcement: p.Enforcement(),
	}
	if spec.DedupWindow > 0 {
		spec.DedupMaxReplays = &replays
	}
	return Limit{spec: spec, maxCost: true}
}

// WithMaxCost sets the largest cost AllowN accepts (1..the limit).
func (l Limit) WithMaxCost(n int64) Limit { l.spec.MaxCost, l.maxCost = n, true; return l }

// WithRevision sets the revision (>= 1); a new revision starts afresh.
func (l Limit) WithRevision(rev int64) Limit { l.spec.Revision = rev; return l }

// WithCleanupGrace sets the time state outlives its reset horizon.
func (l Limit) WithCleanupGrace(d time.Duration) Limit { l.spec.CleanupGrace = d; return l }

// WithMaxClockRegression sets how far server time may go back and still be
// clamped (0 refuses any regression).
func (l Limit) WithMaxClockRegression(d time.Duration) Limit {
	l.spec.MaxClockRegression = d
	return l
}

// WithLocalFallback makes the policy decide locally, on each of instances'
// share of the limit, while the coordination Redis is unreachable, charged
// to the global state after recovery (docs/degraded-mode.md). The
// default is fail closed.
func (l Limit) WithLocalFallback(instances int64) Limit {
	l.spec.FailurePolicy, l.spec.FallbackInstances = ratelimit.LocalFallback, instances
	return l
}

// WithDedup gives the policy a dedup window: a request carrying an
// evaluation ID (the middleware's Idempotency-Key, or
// ratelimit.Request.EvaluationID through Limiter) is charged once within
// it (ADR 0013).
func (l Limit) WithDedup(window time.Duration) Limit { l.spec.DedupWindow = window; return l }

// Global makes the policy one budget for every subject (ADR 0027).
func (l Limit) Global() Limit { l.spec.Scope = ratelimit.ScopeGlobal; return l }

// WithShadow makes the policy a shadow policy, as the policy file's
// "enforce": "shadow" (ADR 0037): Middleware decides it on its routes and
// counts it, but never refuses a request for it, never sends its
// RateLimit fields and never makes it a policy-set member, so it can run
// beside an enforced policy on the same route (a dark launch of a new
// limit). Allow and AllowN answer its decisions as they are: a direct
// caller chooses what a denial means. It cannot be DefaultPolicy.
func (l Limit) WithShadow() Limit { l.spec.Enforcement = ratelimit.Shadow; return l }

// WithRoutes names the ServeMux patterns Middleware limits with this
// policy; a pattern named by several policies makes them a policy set
// (all or nothing, ADR 0027).
func (l Limit) WithRoutes(patterns ...string) Limit {
	l.routes = append(append([]string(nil), l.routes...), patterns...)
	return l
}

// WithoutDenialCache keeps the policy out of the local denial cache (ADR
// 0022), as the policy file's "denialCache": false.
func (l Limit) WithoutDenialCache() Limit {
	off := false
	l.denialCache = &off
	return l
}

// Spec is the policy New builds for id, before its checks: MaxCost, when
// not set, is filled in by New.
func (l Limit) Spec(id string) ratelimit.PolicySpec {
	s := l.spec
	s.ID = ratelimit.PolicyID(id)
	return s
}

// def is l under id as the policy-file checks take it, MaxCost defaulted
// to the limit when the rest of the spec is valid.
func (l Limit) def(id string) config.PolicyDef {
	spec := l.Spec(id)
	if !l.maxCost {
		probe := spec
		probe.MaxCost = 1
		if p, err := ratelimit.NewPolicy(probe); err == nil {
			spec.MaxCost = p.Limit()
		}
	}
	return config.PolicyDef{Spec: spec, Routes: l.routes, DenialCache: l.denialCache}
}
