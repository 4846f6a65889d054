package edge

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// fakeSetPort answers single requests as a fakePort and sets with fn,
// recording every SetRequest.
type fakeSetPort struct {
	fakePort
	fn   func(ratelimit.SetRequest) ratelimit.Outcome
	mu   sync.Mutex
	sets []ratelimit.SetRequest
}

func (p *fakeSetPort) EvaluateSet(_ context.Context, req ratelimit.SetRequest) ratelimit.Outcome {
	p.mu.Lock()
	p.sets = append(p.sets, req)
	p.mu.Unlock()
	return p.fn(req)
}

// setPolicies are a per-second subject member, a per-day subject member
// and a global member, as in ADR 0027's example.
func setPolicies(t *testing.T) []ratelimit.Policy {
	spec := func(id ratelimit.PolicyID, limit int64, window time.Duration, scope ratelimit.Scope) ratelimit.Policy {
		return mustPolicy(t, ratelimit.PolicySpec{ID: id, Revision: 1, Algorithm: ratelimit.AlgorithmFixedWindow,
			Params: ratelimit.FixedWindow{Limit: limit, Window: window}, MaxCost: 5, CleanupGrace: time.Second,
			FailurePolicy: ratelimit.FailClosed, Scope: scope})
	}
	return []ratelimit.Policy{
		spec("api", 100, time.Minute, ratelimit.ScopeSubject),
		spec("per-second", 10, time.Second, ratelimit.ScopeSubject),
		spec("per-day", 1000, 24*time.Hour, ratelimit.ScopeSubject),
		spec("backend", 5000, time.Second, ratelimit.ScopeGlobal),
	}
}

func setConfig(t *testing.T, port ratelimit.EdgePort) Config {
	cfg := baseConfig(t, port, t0)
	cfg.Policies = setPolicies(t)
	cfg.Routes = []Route{
		{Pattern: "GET /api/v1/search", Policy: "per-second"},
		{Pattern: "GET /api/v1/search", Policy: "per-day"},
		{Pattern: "GET /api/v1/search", Policy: "backend"},
		{Pattern: "GET /api/v1/ping", Policy: "per-second"},
	}
	cfg.Cost = func(*http.Request, ratelimit.PolicyID) int64 { return 3 }
	return cfg
}

func member(id ratelimit.PolicyID, allowed bool, limit, remaining int64, retry time.Duration) ratelimit.Decision {
	return ratelimit.Decision{PolicyID: id, Allowed: allowed, Limit: limit, Remaining: remaining, RetryAfter: retry,
		ServerNow: t0, ResetAt: t0.Add(2 * time.Second), PolicyRevision: 1}
}

func setOutcome(members ...ratelimit.Decision) ratelimit.Outcome {
	return ratelimit.Evaluated{Decision: members[ratelimit.Deciding(members)], Members: members}
}

func TestPolicySetRouteEvaluatesAllMembers(t *testing.T) {
	port := &fakeSetPort{fn: func(ratelimit.SetRequest) ratelimit.Outcome {
		return setOutcome(member("per-second", true, 10, 7, 0), member("per-day", true, 1000, 2, 0), member("backend", true, 5000, 4000, 0))
	}}
	m, err := New(setConfig(t, port))
	require.NoError(t, err)
	ran := 0
	h := m.Wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { ran++ }))

	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/v1/search", nil))
	require.Equal(t, 1, ran, "every member admitted: the handler runs")
	require.Len(t, port.sets, 1)
	got := port.sets[0]
	assert.Equal(t, []ratelimit.PolicyID{"per-second", "per-day", "backend"}, got.Members, "members in route order")
	assert.Equal(t, int64(3), got.Cost)
	assert.NoError(t, got.Validate())
	assert.Empty(t, port.requests(), "a set route never calls Evaluate")
	assert.Equal(t, `"per-day";r=2;t=2`, rec.Header().Get("RateLimit"), "RateLimit is the member with the least remaining")
	assert.Equal(t, `"per-second";q=10;w=1, "per-day";q=1000;w=86400, "backend";q=5000;w=1`, rec.Header().Get("RateLimit-Policy"))

	// A single-policy route on the same middleware still uses Evaluate.
	port.out = ratelimit.Evaluated{Decision: member("per-second", true, 10, 9, 0)}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/v1/ping", nil))
	require.Len(t, port.requests(), 1)
	assert.Equal(t, `"per-second";q=10;w=1`, rec.Header().Get("RateLimit-Policy"))
}

func TestPolicySetDenialAnswersTheLongestRetryAfter(t *testing.T) {
	port := &fakeSetPort{fn: func(ratelimit.SetRequest) ratelimit.Outcome {
		return setOutcome(member("per-second", false, 10, 0, 800*time.Millisecond), member("per-day", false, 1000, 0, 3*time.Hour), member("backend", true, 5000, 10, 0))
	}}
	var observed []Observation
	cfg := setConfig(t, port)
	cfg.Observer = ObserverFunc(func(o Observation) { observed = append(observed, o) })
	m, err := New(cfg)
	require.NoError(t, err)
	rec := httptest.NewRecorder()
	m.Wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { t.Fatal("a denied set must not reach the handler") })).
		ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/v1/search", nil))
	assert.Equal(t, http.StatusTooManyRequests, rec.Code)
	assert.Equal(t, "10800", rec.Header().Get("Retry-After"), "the largest member's retry-after")
	assert.True(t, strings.HasPrefix(rec.Header().Get("RateLimit"), `"per-day";r=0;`), rec.Header().Get("RateLimit"))
	require.Len(t, observed, 1)
	assert.Equal(t, http.StatusTooManyRequests, observed[0].Status)
}

func TestPolicySetFailureFailsClosed(t *testing.T) {
	for _, out := range []ratelimit.Outcome{
		ratelimit.Unavailable{PolicyID: "backend", Category: ratelimit.CategoryConnection},
		ratelimit.Indeterminate{PolicyID: "per-day", Category: ratelimit.CategoryTimeout},
		ratelimit.Incompatible{PolicyID: "per-second", Category: ratelimit.CategoryStateIncompatible},
		nil,
	} {
		port := &fakeSetPort{fn: func(ratelimit.SetRequest) ratelimit.Outcome { return out }}
		m, err := New(setConfig(t, port))
		require.NoError(t, err)
		rec := httptest.NewRecorder()
		m.Wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { t.Fatal("a failed set must not reach the handler") })).
			ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/v1/search", nil))
		assert.Equal(t, http.StatusServiceUnavailable, rec.Code, "%T", out)
	}
}

func TestPolicySetConfigErrors(t *testing.T) {
	withDedup := append(setPolicies(t), mustPolicy(t, ratelimit.PolicySpec{ID: "replayed", Revision: 1, Algorithm: ratelimit.AlgorithmFixedWindow,
		Params: ratelimit.FixedWindow{Limit: 10, Window: time.Second}, MaxCost: 1, CleanupGrace: time.Second,
		FailurePolicy: ratelimit.FailClosed, DedupWindow: time.Minute}))
	many := []Route{}
	for i := 0; i <= ratelimit.MaxSetMembers; i++ {
		many = append(many, Route{Pattern: "GET /many", Policy: ratelimit.PolicyID("m" + string(rune('a'+i)))})
	}
	for name, tc := range map[string]struct {
		port   ratelimit.EdgePort
		mutate func(*Config)
		want   string
	}{
		// A port without sets no longer compiles (ADR 0033).
		"member repeats": {&fakeSetPort{}, func(c *Config) {
			c.Routes = append(c.Routes, Route{Pattern: "GET /api/v1/search", Policy: "per-day"})
		}, "Routes[4].Pattern: policy \"per-day\" is already mapped"},
		"dedup member": {&fakeSetPort{}, func(c *Config) {
			c.Policies = withDedup
			c.Routes = append(c.Routes, Route{Pattern: "GET /api/v1/search", Policy: "replayed"})
		}, "set member \"replayed\" has a dedup window"},
		"too many members": {&fakeSetPort{}, func(c *Config) {
			c.Policies = nil
			c.Routes = many
		}, "at most 8 members"},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := setConfig(t, tc.port)
			tc.mutate(&cfg)
			m, err := New(cfg)
			require.ErrorIs(t, err, ErrInvalidConfig)
			assert.Contains(t, err.Error(), tc.want)
			assert.Nil(t, m)
		})
	}
}
