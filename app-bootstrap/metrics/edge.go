package metrics

import (
	"context"
	"errors"
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
