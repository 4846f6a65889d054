package wiring

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/app-bootstrap/config"
	"github.com/tech-log/tech-log-backend/app-bootstrap/metrics"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// offlineGen is a generation over an address nothing listens on: building
// and closing it does no I/O.
func offlineGen(t *testing.T) *policyGen {
	t.Helper()
	g, err := newPolicyGen(loadConfig(t, enabledKV("127.0.0.1:1")...), nil, quietLogger(), metrics.New())
	require.NoError(t, err)
	return g
}

// TestRetireWaitsForItsRequests: a generation a request holds closes only
// once the request has released it; a new request never acquires a
// retired generation.
func TestRetireWaitsForItsRequests(t *testing.T) {
	g := offlineGen(t)
	require.True(t, g.acquire())
	retired := make(chan error, 1)
	go func() { retired <- g.retire(5 * time.Second) }()
	select {
	case err := <-retired:
		t.Fatalf("retired (%v) while a request held the generation", err)
	case <-time.After(100 * time.Millisecond):
	}
	g.mu.RUnlock()
	select {
	case err := <-retired:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("not retired within 5 s of the last release")
	}
	assert.False(t, g.acquire(), "a retired generation is never acquired")
	out := g.edge.Evaluate(t.Context(), ratelimit.Request{PolicyID: "api", SubjectDigest: "retired-subject-000001", Cost: 1, Deadline: time.Now().Add(time.Second)})
	assert.Equal(t, ratelimit.CategoryClosed, ratelimit.CategoryOf(out), "closed: %v", out)
}

// TestRetireIsBounded: a request that outlives the drain bound does not
// keep the generation open; retire says so.
func TestRetireIsBounded(t *testing.T) {
	g := offlineGen(t)
	require.True(t, g.acquire())
	start := time.Now()
	err := g.retire(50 * time.Millisecond)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "did not drain within 50ms")
	assert.Less(t, time.Since(start), 2*time.Second)
	g.mu.RUnlock() // the waiting writer takes the lock and returns
}

// TestCheckRevisions: a changed policy under its serving revision is
// refused, naming it; a new revision, an unchanged policy, a new policy,
// a removed one and a shadow policy promoted to enforced are not.
func TestCheckRevisions(t *testing.T) {
	set := func(limit, revision int64, extra bool) config.PolicySet {
		defs := []config.PolicyDef{{Spec: ratelimit.PolicySpec{ID: "api", Revision: revision, Algorithm: ratelimit.AlgorithmFixedWindow, Params: ratelimit.FixedWindow{Limit: limit, Window: time.Minute}, MaxCost: 1, CleanupGrace: time.Minute, FailurePolicy: ratelimit.FailClosed}}}
		if extra {
			defs = append(defs, config.PolicyDef{Spec: ratelimit.PolicySpec{ID: "extra", Revision: 1, Algorithm: ratelimit.AlgorithmFixedWindow, Params: ratelimit.FixedWindow{Limit: 1, Window: time.Minute}, MaxCost: 1, CleanupGrace: time.Minute, FailurePolicy: ratelimit.FailClosed}})
		}
		s, err := config.NewPolicySet(defs)
		require.NoError(t, err)
		return s
	}
	require.NoError(t, checkRevisions(set(5, 1, false), set(5, 1, true)), "unchanged, one added")
	require.NoError(t, checkRevisions(set(5, 1, true), set(5, 1, false)), "one removed")
	require.NoError(t, checkRevisions(set(5, 1, false), set(6, 2, false)), "a new revision")
	shadow := func(s config.PolicySet) config.PolicySet {
		spec := ratelimit.PolicySpec{ID: "api", Revision: 1, Algorithm: ratelimit.AlgorithmFixedWindow, Params: ratelimit.FixedWindow{Limit: 5, Window: time.Minute}, MaxCost: 1, CleanupGrace: time.Minute, FailurePolicy: ratelimit.FailClosed, Enforcement: ratelimit.Shadow}
		out, err := config.NewPolicySet([]config.PolicyDef{{Spec: spec}})
		require.NoError(t, err)
		return out
	}
	require.NoError(t, checkRevisions(shadow(config.PolicySet{}), set(5, 1, false)), "a shadow policy promoted under its revision")
	require.Error(t, checkRevisions(shadow(config.PolicySet{}), set(6, 1, false)), "promoted with another limit")
	err := checkRevisions(set(5, 1, false), set(6, 1, false))
	require.ErrorIs(t, err, ErrChangedWithoutRevision)
	assert.Contains(t, err.Error(), `policy "api": changed without a new revision (revision 1)`)
}
