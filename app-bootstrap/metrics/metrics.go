package metrics

import (
	"context"
	"errors"
	"net/http"
	"strconv"
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
	// RefundsTotal counts refunds (ratelimit.Refunder, ADR 0025) by
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
	m.registry.MustRegister(
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

// InstrumentEdge wraps port so that every evaluation is counted and timed.
// policies is the configured set; other IDs are labelled OtherPolicy. The
// decorator returns the inner outcome unchanged.
func (m *Metrics) InstrumentEdge(port ratelimit.EdgePort, policies []ratelimit.PolicyID) *Edge {
	return &Edge{inner: port, m: m, known: KnownPolicies(policies), now: time.Now}
}

// Edge is the metrics decorator of ratelimit.EdgePort: it counts each
// outcome and times each evaluation, then returns the inner outcome
// unchanged. Safe for concurrent use if the inner port is.
type Edge struct {
	inner ratelimit.EdgePort
	m     *Metrics
	known map[ratelimit.PolicyID]struct{}
	now   func() time.Time
}

var _ ratelimit.EdgePort = (*Edge)(nil)

// Evaluate implements ratelimit.EdgePort.
func (e *Edge) Evaluate(ctx context.Context, req ratelimit.Request) ratelimit.Outcome {
	e.m.inFlight.Inc()
	defer e.m.inFlight.Dec()
	start := e.now()
	out := e.inner.Evaluate(ctx, req)
	e.observe(req.PolicyID, out, e.now().Sub(start))
	return out
}

// errNoSetPort is the cause of the Incompatible outcome EvaluateSet answers
// when the decorated port does not evaluate policy sets.
var errNoSetPort = errors.New("metrics: the decorated port does not implement ratelimit.SetPort")

// EvaluateSet implements ratelimit.SetPort (ADR 0027) when the decorated
// port does (otherwise every set is Incompatible{program_fault}, never
// admitted). A set is counted and timed once, under the member its
// outcome names: the member that speaks for an evaluated set
// (ratelimit.Deciding: the denying one when denied), the member a failure
// concerns otherwise.
func (e *Edge) EvaluateSet(ctx context.Context, req ratelimit.SetRequest) ratelimit.Outcome {
	e.m.inFlight.Inc()
	defer e.m.inFlight.Dec()
	start := e.now()
	var out ratelimit.Outcome
	if inner, ok := e.inner.(ratelimit.SetPort); ok {
		out = inner.EvaluateSet(ctx, req)
	} else {
		var first ratelimit.PolicyID
		if len(req.Members) > 0 {
			first = req.Members[0]
		}
		out = ratelimit.Incompatible{PolicyID: first, Category: ratelimit.CategoryProgramFault, Cause: errNoSetPort}
	}
	e.observe(ratelimit.PolicyOf(out), out, e.now().Sub(start))
	return out
}

var _ ratelimit.Refunder = (*Edge)(nil)

// errNoRefunder is the cause of the Incompatible outcome Refund answers
// when the decorated port cannot refund.
var errNoRefunder = errors.New("metrics: the decorated port does not implement ratelimit.Refunder")

// Refund implements ratelimit.Refunder when the decorated port does
// (otherwise Incompatible{program_fault}): counted by outcome kind, with
// the units given back.
func (e *Edge) Refund(ctx context.Context, req ratelimit.Request, r ratelimit.Receipt) ratelimit.Outcome {
	var out ratelimit.Outcome
	if inner, ok := e.inner.(ratelimit.Refunder); ok {
		out = inner.Refund(ctx, req, r)
	} else {
		out = ratelimit.Incompatible{PolicyID: req.PolicyID, Category: ratelimit.CategoryProgramFault, Cause: errNoRefunder}
	}
	policy := policyLabel(req.PolicyID, e.known)
	kind, _, _ := labels(out)
	e.m.refunds.WithLabelValues(policy, kind).Inc()
	if v, ok := out.(ratelimit.Evaluated); ok && v.Decision.Refunded > 0 {
		e.m.refunded.WithLabelValues(policy).Add(float64(v.Decision.Refunded))
	}
	return out
}

// observe counts and times one outcome under id.
func (e *Edge) observe(id ratelimit.PolicyID, out ratelimit.Outcome, elapsed time.Duration) {
	policy := policyLabel(id, e.known)
	kind, category, decision := labels(out)
	e.m.outcomes.WithLabelValues(policy, kind, category, decision).Inc()
	if category == localCategory {
		e.m.fallback.WithLabelValues(policy, decision).Inc()
	}
	if v, ok := out.(ratelimit.Evaluated); ok && v.Decision.Replayed {
		e.m.dedup.WithLabelValues(policy, DedupReplayed).Inc()
	}
	if category == string(ratelimit.CategoryDedupConflict) {
		e.m.dedup.WithLabelValues(policy, DedupConflict).Inc()
	}
	e.m.latency.WithLabelValues(policy, kind).Observe(elapsed.Seconds())
}

// labels maps an outcome to its kind, category and decision labels.
func labels(o ratelimit.Outcome) (kind, category, decision string) {
	switch v := o.(type) {
	case ratelimit.Evaluated:
		category := noCategory
		if v.Decision.Source == ratelimit.LocalEmergency {
			category = localCategory
		}
		if v.Decision.Allowed {
			return string(ratelimit.KindEvaluated), category, DecisionAllowed
		}
		return string(ratelimit.KindEvaluated), category, DecisionDenied
	case ratelimit.Unavailable, ratelimit.Indeterminate, ratelimit.Incompatible:
		c := string(ratelimit.CategoryOf(o))
		if c == "" {
			c = "unknown"
		}
		return string(o.Kind()), c, DecisionFailClosed
	}
	// nil or a foreign type: the contract forbids it; count it as refused.
	return string(ratelimit.KindUnknown), "unknown", DecisionFailClosed
}

// RegisterBreaker exports the circuit breaker read at scrape time:
// BreakerState is 1 for the current state (state reports one of
// BreakerStates) and 0 for the others; BreakerTripsTotal counts how often
// it opened (trips). Call it once.
func (m *Metrics) RegisterBreaker(state func() string, trips func() uint64) {
	for _, s := range BreakerStates {
		m.registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        BreakerState,
			Help:        "Circuit breaker of the rate-limit provider: 1 for the current state (closed: calls sent; open: calls answered Unavailable{circuit_open} unsent; half_open: the recovery probe is in flight).",
			ConstLabels: prometheus.Labels{"state": s},
		}, func() float64 {
			if state() == s {
				return 1
			}
			return 0
		}))
	}
	m.registry.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: BreakerTripsTotal,
		Help: "Times the rate-limit provider's circuit breaker opened after a run of connection failures or timeouts.",
	}, func() float64 { return float64(trips()) }))
}

// RegisterDedupRetries exports the provider's retries of Indeterminate
// calls with the same evaluation ID, read at scrape time: decided and
// failed are running totals. Call it once.
func (m *Metrics) RegisterDedupRetries(decided, failed func() uint64) {
	for result, f := range map[string]func() uint64{"decided": decided, "failed": failed} {
		m.registry.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name:        DedupRetriesTotal,
			Help:        "Retries of an Indeterminate rate-limit call with the same evaluation ID (dedup policies only), by result: decided (the retry got a decision, charged at most once) or failed (no decision; the request fails closed).",
			ConstLabels: prometheus.Labels{"result": result},
		}, func() float64 { return float64(f()) }))
	}
}

// RegisterPipeline exports the provider's pipelined-call counters read at
// scrape time (stats returns batches written, the calls they carried, and
// the calls queued now). Call it once.
func (m *Metrics) RegisterPipeline(stats func() (batches, calls int64, queued int)) {
	m.registry.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: PipelineBatchesTotal,
		Help: "Pipelines of rate-limit program calls written (one write and one read for several calls that met busy connection turns).",
	}, func() float64 { b, _, _ := stats(); return float64(b) }))
	m.registry.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: PipelineBatchedCallsTotal,
		Help: "Rate-limit program calls written as part of a pipeline (a call sent alone is not counted).",
	}, func() float64 { _, c, _ := stats(); return float64(c) }))
	m.registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: PipelineQueued,
		Help: "Rate-limit program calls waiting for a connection turn (they go in the next pipeline).",
	}, func() float64 { _, _, q := stats(); return float64(q) }))
}

// FallbackStats is what the local emergency fallback reports at scrape
// time (ratefallback.Stats; policy IDs as strings).
type FallbackStats struct {
	Pending               map[string]int64
	Subjects, MaxSubjects int
	Dropped               uint64
	ChargeFailures        uint64
}

// RegisterFallback exports the local emergency fallback's state, read
// from stats at scrape time: FallbackPending{policy}, FallbackSubjects,
// FallbackMaxSubjects, FallbackDroppedTotal, FallbackChargeFailuresTotal.
func (m *Metrics) RegisterFallback(stats func() FallbackStats) {
	m.registry.MustRegister(&fallbackCollector{stats: stats,
		pending:  prometheus.NewDesc(FallbackPending, "Local emergency admissions of this instance not yet charged to the global state (reconciliation pending), by policy.", []string{"policy"}, nil),
		subjects: prometheus.NewDesc(FallbackSubjects, "Subjects in the local fallback's table.", nil, nil),
		max:      prometheus.NewDesc(FallbackMaxSubjects, "Bound of the local fallback's table (APP_RATE_LIMIT_FALLBACK_MAX_SUBJECTS).", nil, nil),
		dropped:  prometheus.NewDesc(FallbackDroppedTotal, "Local emergency admissions dropped uncharged because their window had passed.", nil, nil),
		failures: prometheus.NewDesc(FallbackChargeFailuresTotal, "Reconciliation charges that failed (retried with backoff until their window passes).", nil, nil),
	})
}

// fallbackCollector reads FallbackStats once per scrape.
type fallbackCollector struct {
	stats                                     func() FallbackStats
	pending, subjects, max, dropped, failures *prometheus.Desc
}

func (c *fallbackCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.pending
	ch <- c.subjects
	ch <- c.max
	ch <- c.dropped
	ch <- c.failures
}

func (c *fallbackCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.stats()
	for policy, n := range st.Pending {
		ch <- prometheus.MustNewConstMetric(c.pending, prometheus.GaugeValue, float64(n), policy)
	}
	ch <- prometheus.MustNewConstMetric(c.subjects, prometheus.GaugeValue, float64(st.Subjects))
	ch <- prometheus.MustNewConstMetric(c.max, prometheus.GaugeValue, float64(st.MaxSubjects))
	ch <- prometheus.MustNewConstMetric(c.dropped, prometheus.CounterValue, float64(st.Dropped))
	ch <- prometheus.MustNewConstMetric(c.failures, prometheus.CounterValue, float64(st.ChargeFailures))
}

// DenialCacheStats is what the local denial cache reports at scrape time.
type DenialCacheStats struct {
	Hits, Invalidations, Evicted uint64
	Entries, MaxEntries          int
	Live                         bool
}

// RegisterDenialCache exports the local denial cache's state, read from
// stats at scrape time: DenialCacheHitsTotal, DenialCacheEntries,
// DenialCacheMaxEntries, DenialCacheInvalidationsTotal,
// DenialCacheEvictedTotal, DenialCacheLive.
func (m *Metrics) RegisterDenialCache(stats func() DenialCacheStats) {
	m.registry.MustRegister(&denialCollector{stats: stats,
		hits:    prometheus.NewDesc(DenialCacheHitsTotal, "Requests answered by the local denial cache (a denial the server gave, not yet past its retry-after).", nil, nil),
		entries: prometheus.NewDesc(DenialCacheEntries, "Denials in the local denial cache's table.", nil, nil),
		max:     prometheus.NewDesc(DenialCacheMaxEntries, "Bound of the local denial cache's table (APP_RATE_LIMIT_DENIAL_CACHE_MAX_ENTRIES).", nil, nil),
		inval:   prometheus.NewDesc(DenialCacheInvalidationsTotal, "Invalidations the local denial cache received (tlbctl reset publishes one).", nil, nil),
		evicted: prometheus.NewDesc(DenialCacheEvictedTotal, "Live denials dropped from the full table to make room.", nil, nil),
		live:    prometheus.NewDesc(DenialCacheLive, "1 while the local denial cache serves (subscribed to invalidations), else 0.", nil, nil),
	})
}

// denialCollector reads DenialCacheStats once per scrape.
type denialCollector struct {
	stats                                    func() DenialCacheStats
	hits, entries, max, inval, evicted, live *prometheus.Desc
}

func (c *denialCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.hits, c.entries, c.max, c.inval, c.evicted, c.live} {
		ch <- d
	}
}

func (c *denialCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.stats()
	live := 0.0
	if st.Live {
		live = 1
	}
	ch <- prometheus.MustNewConstMetric(c.hits, prometheus.CounterValue, float64(st.Hits))
	ch <- prometheus.MustNewConstMetric(c.entries, prometheus.GaugeValue, float64(st.Entries))
	ch <- prometheus.MustNewConstMetric(c.max, prometheus.GaugeValue, float64(st.MaxEntries))
	ch <- prometheus.MustNewConstMetric(c.inval, prometheus.CounterValue, float64(st.Invalidations))
	ch <- prometheus.MustNewConstMetric(c.evicted, prometheus.CounterValue, float64(st.Evicted))
	ch <- prometheus.MustNewConstMetric(c.live, prometheus.GaugeValue, live)
}
