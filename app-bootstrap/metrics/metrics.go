package metrics

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// Metric names, stable: dashboards and alerts use them.
const (
	OutcomesTotal      = "tlb_ratelimit_outcomes_total"
	EvaluationSeconds  = "tlb_ratelimit_evaluation_seconds"
	InFlight           = "tlb_ratelimit_in_flight"
	CacheFailOpenTotal = "tlb_cache_fail_open_total"
	EdgeResponsesTotal = "tlb_edge_responses_total"
	LocalLimitedTotal  = "tlb_local_limit_responses_total"
	// IdentityRefusalsTotal counts requests the identity gate refused,
	// behind the local per-IP guard and before the Redis limiter
	// (APP_WEB_IDENTITY=api-key), by status.
	IdentityRefusalsTotal = "tlb_identity_refusals_total"
	// Ready is 1 when the last readiness check (/readyz) passed, 0 when it
	// failed or none has run.
	Ready = "tlb_ready"
	// MaxInFlight is the configured bound on concurrent evaluations
	// (APP_RATE_LIMIT_MAX_IN_FLIGHT); 0 with the Redis limiter off.
	MaxInFlight = "tlb_ratelimit_max_in_flight"
	// BreakerState and BreakerTripsTotal describe the rate-limit
	// provider's circuit breaker (docs/degraded-mode.md).
	BreakerState      = "tlb_ratelimit_breaker_state"
	BreakerTripsTotal = "tlb_ratelimit_breaker_trips_total"
	// FallbackDecisionsTotal counts local emergency decisions (Source
	// LocalEmergency) per policy and decision.
	FallbackDecisionsTotal = "tlb_ratelimit_fallback_decisions_total"
	// FallbackPending is, per local-fallback policy, the local admissions
	// not yet charged to the global state; FallbackSubjects and
	// FallbackMaxSubjects the local table's use and bound;
	// FallbackDroppedTotal the local admissions dropped uncharged once
	// their window had passed; FallbackChargeFailuresTotal the charges
	// that failed (each retried with backoff). docs/degraded-mode.md.
	FallbackPending             = "tlb_ratelimit_fallback_pending"
	FallbackSubjects            = "tlb_ratelimit_fallback_subjects"
	FallbackMaxSubjects         = "tlb_ratelimit_fallback_max_subjects"
	FallbackDroppedTotal        = "tlb_ratelimit_fallback_dropped_total"
	FallbackChargeFailuresTotal = "tlb_ratelimit_fallback_charge_failures_total"
	// DenialCacheHitsTotal counts requests the local denial cache answered
	// (ADR 0022); DenialCacheEntries and DenialCacheMaxEntries are its
	// table's use and bound; DenialCacheInvalidationsTotal the
	// invalidations it received (tlbctl reset); DenialCacheEvictedTotal the
	// live entries dropped to make room; DenialCacheLive is 1 while it
	// serves (subscribed to invalidations).
	DenialCacheHitsTotal          = "tlb_ratelimit_denial_cache_hits_total"
	DenialCacheEntries            = "tlb_ratelimit_denial_cache_entries"
	DenialCacheMaxEntries         = "tlb_ratelimit_denial_cache_max_entries"
	DenialCacheInvalidationsTotal = "tlb_ratelimit_denial_cache_invalidations_total"
	DenialCacheEvictedTotal       = "tlb_ratelimit_denial_cache_evicted_total"
	DenialCacheLive               = "tlb_ratelimit_denial_cache_live"
	// DedupTotal counts evaluation-dedup events per policy and result:
	// "replayed" (a recorded decision answered again, nothing consumed)
	// and "conflict" (an evaluation ID reused with another cost or policy,
	// Incompatible{dedup_conflict}).
	DedupTotal = "tlb_ratelimit_dedup_total"
	// RefundsTotal counts refunds (ratelimit.EdgePort.Refund, ADR 0025) by
	// policy and outcome kind; RefundedUnitsTotal the units they gave back.
	RefundsTotal       = "tlb_ratelimit_refunds_total"
	RefundedUnitsTotal = "tlb_ratelimit_refunded_units_total"
	// DelayedTotal counts the requests the edge held for their slot in a
	// leaky-bucket queue (ADR 0028), by policy and result: "passed" (held,
	// then passed on), "left_refunded" (the context ended first; the slot
	// was given back), "left_kept" (it ended first and the refund did not
	// run: the charge stays). DelaySeconds is the delays they were given.
	DelayedTotal = "tlb_ratelimit_delayed_total"
	DelaySeconds = "tlb_ratelimit_delay_seconds"
	// DedupRetriesTotal counts the provider's one retry of an
	// Indeterminate call with the same evaluation ID, by result: "decided"
	// (the retry got a decision) or "failed" (it did not).
	DedupRetriesTotal = "tlb_ratelimit_dedup_retries_total"
	// PipelineBatchesTotal, PipelineBatchedCallsTotal and PipelineQueued
	// describe pipelined program calls (APP_RATE_LIMIT_PIPELINE_MAX_BATCH):
	// batches written, the calls they carried, and the calls waiting for a
	// connection turn now.
	PipelineBatchesTotal      = "tlb_ratelimit_pipeline_batches_total"
	PipelineBatchedCallsTotal = "tlb_ratelimit_pipeline_batched_calls_total"
	PipelineQueued            = "tlb_ratelimit_pipeline_queued"
)

// Values of DelayedTotal's result label.
const (
	DelayPassed       = "passed"
	DelayLeftRefunded = "left_refunded"
	DelayLeftKept     = "left_kept"
)

// Values of DedupTotal's result label.
const (
	DedupReplayed = "replayed"
	DedupConflict = "conflict"
)

// BreakerStates are the values of the state label of BreakerState.
var BreakerStates = []string{"closed", "open", "half_open"}

// Label values of the decision label.
const (
	// DecisionAllowed and DecisionDenied are the two Evaluated decisions.
	DecisionAllowed = "allowed"
	DecisionDenied  = "denied"
	// DecisionFailClosed marks a failed outcome (Unavailable,
	// Indeterminate, Incompatible): no decision, the request is refused.
	DecisionFailClosed = "fail_closed"
	// OtherPolicy is the policy label of IDs outside the configured set.
	OtherPolicy = "other"
	// noCategory is the category label of Evaluated outcomes.
	noCategory = "none"
	// localCategory is the category label of a local emergency decision
	// (an Evaluated outcome with Source LocalEmergency).
	localCategory = "local_emergency"
)

// Metrics holds the service's collectors in a private registry. Safe for
// concurrent use.
type Metrics struct {
	registry *prometheus.Registry
	outcomes *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	inFlight prometheus.Gauge
	cacheErr *prometheus.CounterVec
	edgeResp *prometheus.CounterVec
	localRes *prometheus.CounterVec
	identRes *prometheus.CounterVec
	ready    prometheus.Gauge
	maxIn    prometheus.Gauge
	fallback *prometheus.CounterVec
	dedup    *prometheus.CounterVec
	refunds  *prometheus.CounterVec
	refunded *prometheus.CounterVec
	delayed  *prometheus.CounterVec
	delays   *prometheus.HistogramVec
	shadow   *prometheus.CounterVec

	plansOnce sync.Once
	plans     *Plans
	// leasesOnce registers the lease collector at the first Leases call.
	leasesOnce sync.Once
	leases     *Leases
}

// New returns Metrics with its own registry holding the Go runtime and
// process collectors and the service's metrics.
func New() *Metrics {
	m := &Metrics{
		registry: prometheus.NewRegistry(),
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: OutcomesTotal,
			Help: "Rate-limit evaluations by policy, outcome kind (evaluated, unavailable, indeterminate, incompatible), failure category (none for evaluated) and decision (allowed, denied, fail_closed).",
		}, []string{"policy", "kind", "category", "decision"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    EvaluationSeconds,
			Help:    "Time spent in EdgePort.Evaluate, by policy and outcome kind.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1},
		}, []string{"policy", "kind"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: InFlight,
			Help: "Rate-limit evaluations currently in progress.",
		}),
		cacheErr: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: CacheFailOpenTotal,
			Help: "Cache backend failures turned into misses or no-ops by the fail-open decorator, by operation.",
		}, []string{"op"}),
	}
	m.edgeResp = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: EdgeResponsesTotal,
		Help: "Requests through the edge (Redis) limiter middleware by policy and result: admitted, or the status it answered itself (429, 503, 400 for an unreadable client identity, 500 for no client address).",
	}, []string{"policy", "result"})
	m.localRes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: LocalLimitedTotal,
		Help: "Requests the legacy local limiter answered itself, by status (429 over the local limit, 400/500 unreadable identity).",
	}, []string{"status"})
	m.identRes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: IdentityRefusalsTotal,
		Help: "Requests refused by the identity gate, behind the local per-IP guard and before the Redis limiter (APP_WEB_IDENTITY=api-key), by status (401 missing or unknown key, 400 malformed, 500 no client address).",
	}, []string{"status"})
	m.ready = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: Ready,
		Help: "1 when the last readiness check (/readyz: with the Redis limiter, its start-up checks and a PING) passed, 0 when it failed or none has run.",
	})
	m.maxIn = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: MaxInFlight,
		Help: "The bound on concurrent rate-limit evaluations (APP_RATE_LIMIT_MAX_IN_FLIGHT); 0 with the Redis limiter off.",
	})
	m.fallback = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: FallbackDecisionsTotal,
		Help: "Local emergency decisions (the coordination Redis unreachable, a local-fallback policy decided on this instance's share), by policy and decision (allowed, denied).",
	}, []string{"policy", "decision"})
	m.dedup = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: DedupTotal,
		Help: "Evaluation dedup (policies with a dedupWindow) by policy and result: replayed (a retry answered with the decision recorded for its evaluation ID, nothing consumed), conflict (the ID reused with another cost or policy).",
	}, []string{"policy", "result"})
	m.refunds = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: RefundsTotal,
		Help: "Refunds of admissions (a policy set's member given back, ADR 0025), by policy and outcome kind (evaluated: ran or had nothing to give back; unavailable: nothing sent; indeterminate: may have run; incompatible).",
	}, []string{"policy", "kind"})
	m.refunded = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: RefundedUnitsTotal,
		Help: "Units given back by refunds that ran, by policy.",
	}, []string{"policy"})
	m.delayed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: DelayedTotal,
		Help: "Requests the edge held for their slot in a leaky-bucket queue (ADR 0028), by policy and result: passed (held, then passed on), left_refunded (the client or the caller's deadline went first; the slot was given back), left_kept (went first; the refund did not run, the charge stays).",
	}, []string{"policy", "result"})
	m.delays = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    DelaySeconds,
		Help:    "Delays the leaky-bucket queues gave the requests the edge held, by policy.",
		Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 20},
	}, []string{"policy"})
	m.shadow = newShadowDecisions()
	m.registry.MustRegister(
		m.shadow,
		m.fallback, m.dedup, m.refunds, m.refunded, m.delayed, m.delays,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.outcomes, m.latency, m.inFlight, m.cacheErr, m.edgeResp, m.localRes, m.identRes, m.ready, m.maxIn,
	)
	return m
}

// Registry is the private registry, for tests and extra collectors.
func (m *Metrics) Registry() *prometheus.Registry { return m.registry }

// Handler serves the registry in the Prometheus exposition format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{
		ErrorHandling:       promhttp.ContinueOnError,
		MaxRequestsInFlight: 4,
		Timeout:             5 * time.Second,
	})
}

// SetReady records the result of a readiness check.
func (m *Metrics) SetReady(ok bool) {
	if ok {
		m.ready.Set(1)
	} else {
		m.ready.Set(0)
	}
}

// SetMaxInFlight records the configured in-flight bound.
func (m *Metrics) SetMaxInFlight(n int) { m.maxIn.Set(float64(n)) }

// CacheFailure counts one swallowed cache failure; it matches
// rediscache.NewFailOpen's callback. The error is not recorded.
func (m *Metrics) CacheFailure(op string, _ error) {
	switch op {
	case "get", "set", "set_if_absent", "compare_and_replace", "delete":
	default:
		op = "other"
	}
	m.cacheErr.WithLabelValues(op).Inc()
}

// EdgeResponse counts one request the edge middleware handled: admitted, or
// the status it answered. known bounds the policy label as InstrumentEdge
// does.
func (m *Metrics) EdgeResponse(policy ratelimit.PolicyID, known map[ratelimit.PolicyID]struct{}, admitted bool, status int) {
	p := policyLabel(policy, known)
	m.edgeResp.WithLabelValues(p, resultLabel(admitted, status)).Inc()
}

// EdgeDelay counts one request the edge held for its slot in a leaky-bucket
// queue for delay: passed on, or left first (abandoned) with its slot
// given back (refunded) or not. known bounds the policy label as
// EdgeResponse does.
func (m *Metrics) EdgeDelay(policy ratelimit.PolicyID, known map[ratelimit.PolicyID]struct{}, delay time.Duration, abandoned, refunded bool) {
	p := policyLabel(policy, known)
	result := DelayPassed
	switch {
	case abandoned && refunded:
		result = DelayLeftRefunded
	case abandoned:
		result = DelayLeftKept
	}
	m.delayed.WithLabelValues(p, result).Inc()
	m.delays.WithLabelValues(p).Observe(delay.Seconds())
}

// policyLabel is the policy label of id: id itself when it is among
// known (the configured policies), else OtherPolicy, so that the label's
// values stay bounded.
func policyLabel(id ratelimit.PolicyID, known map[ratelimit.PolicyID]struct{}) string {
	if _, ok := known[id]; !ok {
		return OtherPolicy
	}
	return string(id)
}

// IdentityRefused counts one request the identity gate refused with status.
func (m *Metrics) IdentityRefused(status int) {
	m.identRes.WithLabelValues(resultLabel(false, status)).Inc()
}

// LocalLimited counts one response the local limiter wrote itself.
func (m *Metrics) LocalLimited(status int) {
	m.localRes.WithLabelValues(resultLabel(false, status)).Inc()
}

// resultLabel bounds a status to the values the limiters answer.
func resultLabel(admitted bool, status int) string {
	if admitted {
		return "admitted"
	}
	switch status {
	case 400, 401, 422, 429, 500, 503:
		return strconv.Itoa(status)
	}
	return "other"
}

// KnownPolicies is the label set of policies: IDs outside it are "other".
func KnownPolicies(ids []ratelimit.PolicyID) map[ratelimit.PolicyID]struct{} {
	known := make(map[ratelimit.PolicyID]struct{}, len(ids))
	for _, id := range ids {
		known[id] = struct{}{}
	}
	return known
}
