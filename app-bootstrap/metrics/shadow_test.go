package metrics

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit/ratelimittest"
)

// TestCountShadow: every evaluation of a shadow policy is counted by its
// result (an allowed decision would_allow, a denial would_deny, every
// other outcome undecided); an enforced policy's are not; each shadow
// policy's results exist at 0 before its first evaluation.
func TestCountShadow(t *testing.T) {
	pol := func(id ratelimit.PolicyID, e ratelimit.Enforcement) ratelimit.Policy {
		p, err := ratelimit.NewPolicy(ratelimit.PolicySpec{ID: id, Revision: 1, Algorithm: ratelimit.AlgorithmFixedWindow,
			Params: ratelimit.FixedWindow{Limit: 5, Window: time.Second}, MaxCost: 1, CleanupGrace: time.Second,
			FailurePolicy: ratelimit.FailClosed, Enforcement: e})
		require.NoError(t, err)
		return p
	}
	policies := []ratelimit.Policy{pol("api", ratelimit.Enforce), pol("dark", ratelimit.Shadow)}
	var next ratelimit.Outcome
	fake := &ratelimittest.Fake{Func: func(context.Context, ratelimit.Request) ratelimit.Outcome { return next }}
	m := New()
	e := m.InstrumentEdge(fake, []ratelimit.PolicyID{"api", "dark"}).CountShadow(policies)

	for _, r := range ShadowResults {
		assert.Equal(t, 0.0, testutil.ToFloat64(m.shadow.WithLabelValues("dark", r)), "%s exists at 0", r)
	}
	for _, step := range []struct {
		policy ratelimit.PolicyID
		out    ratelimit.Outcome
	}{
		{"dark", ratelimit.Evaluated{Decision: ratelimit.Decision{PolicyID: "dark", Allowed: true}}},
		{"dark", ratelimit.Evaluated{Decision: ratelimit.Decision{PolicyID: "dark"}}},
		{"dark", ratelimit.Evaluated{Decision: ratelimit.Decision{PolicyID: "dark"}}},
		{"dark", ratelimit.Unavailable{PolicyID: "dark", Category: ratelimit.CategoryConnection}},
		{"dark", ratelimit.Indeterminate{PolicyID: "dark", Category: ratelimit.CategoryTimeout}},
		{"dark", ratelimit.Incompatible{PolicyID: "dark", Category: ratelimit.CategoryMalformedReply}},
		{"dark", nil},
		{"api", ratelimit.Evaluated{Decision: ratelimit.Decision{PolicyID: "api"}}},
	} {
		next = step.out
		e.Evaluate(context.Background(), ratelimit.Request{PolicyID: step.policy})
	}
	assert.Equal(t, 1.0, testutil.ToFloat64(m.shadow.WithLabelValues("dark", ShadowWouldAllow)))
	assert.Equal(t, 2.0, testutil.ToFloat64(m.shadow.WithLabelValues("dark", ShadowWouldDeny)))
	assert.Equal(t, 4.0, testutil.ToFloat64(m.shadow.WithLabelValues("dark", ShadowUndecided)))
	assert.Equal(t, 3, testutil.CollectAndCount(m.shadow), "the enforced policy is not counted")
	assert.Equal(t, 2.0, testutil.ToFloat64(m.outcomes.WithLabelValues("dark", string(ratelimit.KindEvaluated), noCategory, DecisionDenied)),
		"a shadow policy's outcomes are counted as every policy's too")
}

// TestShadowSkipped: a shadow call the edge did not make is counted
// skipped under its policy, and an unknown policy folds into the bounded
// label.
func TestShadowSkipped(t *testing.T) {
	m := New()
	known := KnownPolicies([]ratelimit.PolicyID{"dark"})
	m.ShadowSkipped("dark", known)
	m.ShadowSkipped("dark", known)
	m.ShadowSkipped("not-in-the-file", known)
	assert.InDelta(t, 2.0, testutil.ToFloat64(m.shadow.WithLabelValues("dark", ShadowSkippedResult)), 0)
	assert.InDelta(t, 1.0, testutil.ToFloat64(m.shadow.WithLabelValues(policyLabel("not-in-the-file", known), ShadowSkippedResult)), 0)
	assert.NotEqual(t, "not-in-the-file", policyLabel("not-in-the-file", known))
}
