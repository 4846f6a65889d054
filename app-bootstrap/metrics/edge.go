package metrics

import (
	"context"
	"time"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

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
	// shadows are the shadow policies CountShadow counts; nil for none.
	shadows map[ratelimit.PolicyID]struct{}
}

var _ ratelimit.EdgePort = (*Edge)(nil)

// Evaluate implements ratelimit.EdgePort.
func (e *Edge) Evaluate(ctx context.Context, req ratelimit.Request) ratelimit.Outcome {
	e.m.inFlight.Inc()
	defer e.m.inFlight.Dec()
	start := e.now()
	out := e.inner.Evaluate(ctx, req)
	e.observe(req.PolicyID, out, e.now().Sub(start))
	if _, ok := e.shadows[req.PolicyID]; ok {
		// A shadow policy's (shadow.go: off the request path of others).
		e.countShadow(req.PolicyID, out)
	}
	return out
}

// EvaluateSet implements ratelimit.EdgePort (ADR 0027). A set is counted and timed once, under the member its
// outcome names: the member that speaks for an evaluated set
// (ratelimit.Deciding: the denying one when denied), the member a failure
// concerns otherwise.
func (e *Edge) EvaluateSet(ctx context.Context, req ratelimit.SetRequest) ratelimit.Outcome {
	e.m.inFlight.Inc()
	defer e.m.inFlight.Dec()
	start := e.now()
	out := e.inner.EvaluateSet(ctx, req)
	e.observe(ratelimit.PolicyOf(out), out, e.now().Sub(start))
	return out
}

// Refund implements ratelimit.EdgePort: counted by outcome kind, with
// the units given back.
func (e *Edge) Refund(ctx context.Context, req ratelimit.Request, r ratelimit.Receipt) ratelimit.Outcome {
	out := e.inner.Refund(ctx, req, r)
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
