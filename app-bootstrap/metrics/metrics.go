package metrics

import (
	"context"
	"net/http"
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
)

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
)

// Metrics holds the service's collectors in a private registry. Safe for
// concurrent use.
type Metrics struct {
	registry *prometheus.Registry
	outcomes *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	inFlight prometheus.Gauge
	cacheErr *prometheus.CounterVec
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
	m.registry.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.outcomes, m.latency, m.inFlight, m.cacheErr,
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

// InstrumentEdge wraps port so that every evaluation is counted and timed.
// policies is the configured set; other IDs are labelled OtherPolicy. The
// decorator returns the inner outcome unchanged.
func (m *Metrics) InstrumentEdge(port ratelimit.EdgePort, policies []ratelimit.PolicyID) *Edge {
	known := make(map[ratelimit.PolicyID]struct{}, len(policies))
	for _, id := range policies {
		known[id] = struct{}{}
	}
	return &Edge{inner: port, m: m, known: known, now: time.Now}
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
	elapsed := e.now().Sub(start)

	policy := string(req.PolicyID)
	if _, ok := e.known[req.PolicyID]; !ok {
		policy = OtherPolicy
	}
	kind, category, decision := labels(out)
	e.m.outcomes.WithLabelValues(policy, kind, category, decision).Inc()
	e.m.latency.WithLabelValues(policy, kind).Observe(elapsed.Seconds())
	return out
}

// labels maps an outcome to its kind, category and decision labels.
func labels(o ratelimit.Outcome) (kind, category, decision string) {
	switch v := o.(type) {
	case ratelimit.Evaluated:
		if v.Decision.Allowed {
			return string(ratelimit.KindEvaluated), noCategory, DecisionAllowed
		}
		return string(ratelimit.KindEvaluated), noCategory, DecisionDenied
	case ratelimit.Unavailable, ratelimit.Indeterminate, ratelimit.Incompatible:
		c := string(ratelimit.CategoryOf(o))
		if c == "" {
			c = "unknown"
		}
		return string(o.Kind()), c, DecisionFailClosed
	}
	// nil or a foreign type: the contract forbids it; count it as refused.
	return "invalid", "unknown", DecisionFailClosed
}
