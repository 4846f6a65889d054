package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// ShadowDecisionsTotal counts the evaluations of shadow policies (the
// policy file's "enforce": "shadow", ADR 0037) by policy and result
// (ShadowResults): what enforcing the policy would have answered. The
// policy label is bounded by the policy file: only its shadow policies
// are counted. The HTTP edge and the Envoy RLS both ask shadow policies
// through the instrumented port, so both are counted here; an RLS rule
// made shadow by shadow_mode (or APP_RLS_SHADOW_MODE) over an enforced
// policy is counted by RLSDecisionsTotal's would_deny only.
const ShadowDecisionsTotal = "tlb_ratelimit_shadow_decisions_total"

// Values of ShadowDecisionsTotal's result label, the RLS's vocabulary.
const (
	// ShadowWouldAllow: the policy admitted the request.
	ShadowWouldAllow = "would_allow"
	// ShadowWouldDeny: the policy denied it; enforced, it would be 429.
	ShadowWouldDeny = "would_deny"
	// ShadowUndecided: no decision (Unavailable, Indeterminate,
	// Incompatible); enforced, it would fail closed (503).
	ShadowUndecided = "undecided"
	// ShadowSkippedResult: no call was made, since the edge's bound on
	// shadow calls in flight was reached (a quarter of
	// APP_RATE_LIMIT_MAX_IN_FLIGHT); not counted in ShadowResults' rates.
	ShadowSkippedResult = "skipped"
)

// ShadowResults are the result label's values.
var ShadowResults = []string{ShadowWouldAllow, ShadowWouldDeny, ShadowUndecided}

// newShadowDecisions is ShadowDecisionsTotal's collector; New registers
// it.
func newShadowDecisions() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: ShadowDecisionsTotal,
		Help: "Evaluations of shadow policies (\"enforce\": \"shadow\": decided and counted, never refusing a request), by policy and result: would_allow, would_deny (enforced, a 429), undecided (enforced, a 503).",
	}, []string{"policy", "result"})
}

// ShadowResult is the result label of a shadow policy's outcome: only an
// Evaluated outcome is a decision, and only an allowed one admits, as
// ratelimit.Admitted says.
func ShadowResult(o ratelimit.Outcome) string {
	if v, ok := o.(ratelimit.Evaluated); ok {
		if ratelimit.Admitted(v) {
			return ShadowWouldAllow
		}
		return ShadowWouldDeny
	}
	return ShadowUndecided
}

// CountShadow returns a copy of e that also counts, in
// ShadowDecisionsTotal, every evaluation of a shadow policy among
// policies (the others are counted as before, and only so). Each shadow
// policy's results start at 0, so a rate of would_deny exists from the
// first scrape.
func (e *Edge) CountShadow(policies []ratelimit.Policy) *Edge {
	c := *e
	c.shadows = map[ratelimit.PolicyID]struct{}{}
	for _, p := range policies {
		if !p.Shadow() {
			continue
		}
		c.shadows[p.ID()] = struct{}{}
		for _, r := range ShadowResults {
			e.m.shadow.WithLabelValues(policyLabel(p.ID(), e.known), r)
		}
	}
	return &c
}

// ShadowSkipped counts a call of the shadow policy id that the edge did
// not make (its bound on shadow calls in flight was reached); known bounds
// the policy label.
func (m *Metrics) ShadowSkipped(id ratelimit.PolicyID, known map[ratelimit.PolicyID]struct{}) {
	m.shadow.WithLabelValues(policyLabel(id, known), ShadowSkippedResult).Inc()
}

// countShadow counts out, the outcome of the shadow policy id.
func (e *Edge) countShadow(id ratelimit.PolicyID, out ratelimit.Outcome) {
	e.m.shadow.WithLabelValues(policyLabel(id, e.known), ShadowResult(out)).Inc()
}
