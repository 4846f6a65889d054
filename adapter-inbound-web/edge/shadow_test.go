package edge

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-inbound-web/subject"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// Shadow policies (ADR 0037): decided on their own beside the enforced
// policy or set, never changing the response.

// shadowPolicy is a fixed window of limit per second with Enforcement e.
func shadowPolicy(t *testing.T, id ratelimit.PolicyID, limit int64, e ratelimit.Enforcement) ratelimit.Policy {
	return mustPolicy(t, ratelimit.PolicySpec{ID: id, Revision: 1, Algorithm: ratelimit.AlgorithmFixedWindow,
		Params: ratelimit.FixedWindow{Limit: limit, Window: time.Second}, MaxCost: 2, CleanupGrace: time.Second,
		FailurePolicy: ratelimit.FailClosed, Enforcement: e})
}

// shadowConfig has "GET /api/v1/search" limited by the enforced set
// per-second + per-day beside the shadow "dark"; "GET /api/v1/ping" by
// per-second beside "dark" and "dark2"; "GET /api/v1/new" by "dark" only
// (so by the default policy, api, besides).
// Costs are 2 for the shadow policies and 3 otherwise.
func shadowConfig(t *testing.T, port ratelimit.EdgePort) Config {
	cfg := setConfig(t, port)
	cfg.Policies = append(cfg.Policies, shadowPolicy(t, "dark", 2, ratelimit.Shadow), shadowPolicy(t, "dark2", 3, ratelimit.Shadow))
	cfg.Routes = []Route{
		{Pattern: "GET /api/v1/search", Policy: "dark"},
		{Pattern: "GET /api/v1/search", Policy: "per-second"},
		{Pattern: "GET /api/v1/search", Policy: "per-day"},
		{Pattern: "GET /api/v1/ping", Policy: "per-second"},
		{Pattern: "GET /api/v1/ping", Policy: "dark"},
		{Pattern: "GET /api/v1/ping", Policy: "dark2"},
		{Pattern: "GET /api/v1/new", Policy: "dark"},
	}
	cfg.Cost = func(_ *http.Request, id ratelimit.PolicyID) int64 {
		if id == "dark" || id == "dark2" {
			return 2
		}
		return 3
	}
	return cfg
}

// byPolicy answers each single request with the outcome of its policy
// (allowed when none is given).
func byPolicy(outs map[ratelimit.PolicyID]ratelimit.Outcome) func(ratelimit.Request) ratelimit.Outcome {
	return func(r ratelimit.Request) ratelimit.Outcome {
		if o, ok := outs[r.PolicyID]; ok {
			return o
		}
		return ratelimit.Evaluated{Decision: member(r.PolicyID, true, 10, 9, 0)}
	}
}

// waitCalls waits, at most 2 s, until port has seen n single requests
// (the shadow calls run on their own goroutines), and returns them by
// policy.
func waitCalls(t *testing.T, port *fakePort, n int) map[ratelimit.PolicyID]ratelimit.Request {
	t.Helper()
	require.Eventually(t, func() bool { return len(port.requests()) >= n }, 2*time.Second, time.Millisecond, "want %d calls", n)
	got := map[ratelimit.PolicyID]ratelimit.Request{}
	for _, r := range port.requests() {
		got[r.PolicyID] = r
	}
	require.Len(t, got, n, "one call per policy")
	return got
}

var undecided = map[string]ratelimit.Outcome{
	"unavailable":   ratelimit.Unavailable{PolicyID: "dark", Category: ratelimit.CategoryConnection, RetryAfter: time.Hour},
	"indeterminate": ratelimit.Indeterminate{PolicyID: "dark", Category: ratelimit.CategoryTimeout, RetryAfter: time.Hour},
	"incompatible":  ratelimit.Incompatible{PolicyID: "dark", Category: ratelimit.CategoryMalformedReply},
	"nil":           nil,
	"denied":        ratelimit.Evaluated{Decision: member("dark", false, 2, 0, time.Hour)},
}

// TestShadowNeverChangesTheResponse: whatever a shadow policy answers
// (denied, or undecided of every kind), the enforced policy decides the
// status, the body and every field, as if the shadow were not there.
func TestShadowNeverChangesTheResponse(t *testing.T) {
	for _, enforced := range []ratelimit.Outcome{
		ratelimit.Evaluated{Decision: member("per-second", true, 10, 7, 0)},
		ratelimit.Evaluated{Decision: member("per-second", false, 10, 0, 1500*time.Millisecond)},
		ratelimit.Unavailable{PolicyID: "per-second", Category: ratelimit.CategoryConnection, RetryAfter: 3 * time.Second},
	} {
		// The reference: the same route without its shadow policies.
		ref := &fakePort{fn: byPolicy(map[ratelimit.PolicyID]ratelimit.Outcome{"per-second": enforced})}
		refCfg := shadowConfig(t, ref)
		refCfg.Routes = []Route{{Pattern: "GET /api/v1/ping", Policy: "per-second"}}
		want := serveOnce(t, refCfg, "/api/v1/ping")

		for name, shadow := range undecided {
			t.Run(string(enforced.Kind())+"/"+name, func(t *testing.T) {
				port := &fakePort{fn: byPolicy(map[ratelimit.PolicyID]ratelimit.Outcome{"per-second": enforced, "dark": shadow, "dark2": shadow})}
				got := serveOnce(t, shadowConfig(t, port), "/api/v1/ping")
				assert.Equal(t, want.ran, got.ran, "the handler runs as the enforced policy says")
				assert.Equal(t, want.rec.Code, got.rec.Code)
				assert.Equal(t, want.rec.Header(), got.rec.Header(), "fields only from the enforced policy")
				assert.Equal(t, want.rec.Body.String(), got.rec.Body.String())
				calls := waitCalls(t, port, 3)
				assert.Equal(t, int64(3), calls["per-second"].Cost)
				for _, id := range []ratelimit.PolicyID{"dark", "dark2"} {
					assert.Equal(t, int64(2), calls[id].Cost, "the shadow's own cost")
					assert.Equal(t, calls["per-second"].Deadline, calls[id].Deadline, "the enforced call's deadline")
					assert.Equal(t, calls["per-second"].SubjectDigest, calls[id].SubjectDigest)
				}
			})
		}
	}
}

type served struct {
	rec *httptest.ResponseRecorder
	ran bool
	obs []Observation
}

func serveOnce(t *testing.T, cfg Config, path string) served {
	t.Helper()
	var s served
	cfg.Observer = ObserverFunc(func(o Observation) { s.obs = append(s.obs, o) })
	m, err := New(cfg)
	require.NoError(t, err)
	s.rec = httptest.NewRecorder()
	m.Wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { s.ran = true })).
		ServeHTTP(s.rec, httptest.NewRequest(http.MethodGet, path, nil))
	return s
}

// TestShadowNeverJoinsTheSet: a set route's shadow policy is not a
// member (EvaluateSet gets the enforced ones only, RateLimit-Policy lists
// them only); it is its own Evaluate, and its denial does not refuse the
// set.
func TestShadowNeverJoinsTheSet(t *testing.T) {
	port := &fakeSetPort{fn: func(ratelimit.SetRequest) ratelimit.Outcome {
		return setOutcome(member("per-second", true, 10, 7, 0), member("per-day", true, 1000, 2, 0))
	}}
	port.fakePort.fn = byPolicy(map[ratelimit.PolicyID]ratelimit.Outcome{"dark": undecided["denied"]})
	got := serveOnce(t, shadowConfig(t, port), "/api/v1/search")
	require.True(t, got.ran, "the set admitted: a shadow denial does not refuse it")
	assert.Equal(t, http.StatusOK, got.rec.Code)
	require.Len(t, port.sets, 1)
	assert.Equal(t, []ratelimit.PolicyID{"per-second", "per-day"}, port.sets[0].Members)
	assert.Equal(t, `"per-second";q=10;w=1, "per-day";q=1000;w=86400`, got.rec.Header().Get("RateLimit-Policy"))
	assert.Equal(t, `"per-day";r=2;t=2`, got.rec.Header().Get("RateLimit"))
	calls := waitCalls(t, &port.fakePort, 1)
	assert.Equal(t, port.sets[0].Deadline, calls["dark"].Deadline)
	require.Len(t, got.obs, 1)
	assert.Equal(t, Observation{Policy: "per-second", Admitted: true}, got.obs[0], "observed as the set, the shadow not at all")
}

// TestShadowPatternKeepsTheEnforcedPolicy: a pattern only a shadow policy
// names ("GET /api/v1/new": "dark") takes no request out of enforcement:
// the request is decided by the policy that decides it without the shadow
// route (here the default policy, api), its denial is a 429 whatever the
// shadow answers, and the shadow is asked beside it; a request whose
// identity cannot be read is refused as the enforced path refuses it,
// with no shadow call.
func TestShadowPatternKeepsTheEnforcedPolicy(t *testing.T) {
	for name, shadow := range undecided {
		t.Run(name, func(t *testing.T) {
			port := &fakePort{fn: byPolicy(map[ratelimit.PolicyID]ratelimit.Outcome{"dark": shadow})}
			got := serveOnce(t, shadowConfig(t, port), "/api/v1/new")
			assert.True(t, got.ran)
			assert.Equal(t, http.StatusOK, got.rec.Code)
			assert.Contains(t, got.rec.Header().Get("RateLimit"), `"api"`, "the default policy's field")
			require.Len(t, got.obs, 1)
			assert.Equal(t, ratelimit.PolicyID("api"), got.obs[0].Policy)
			calls := waitCalls(t, port, 2)
			assert.Equal(t, int64(2), calls["dark"].Cost)
			assert.Equal(t, int64(3), calls["api"].Cost)
		})
	}
	t.Run("enforced denial", func(t *testing.T) {
		port := &fakePort{fn: byPolicy(map[ratelimit.PolicyID]ratelimit.Outcome{
			"api": ratelimit.Evaluated{Decision: member("api", false, 10, 0, time.Second)},
		})}
		got := serveOnce(t, shadowConfig(t, port), "/api/v1/new")
		assert.False(t, got.ran, "the shadow admits, the enforced default denies")
		assert.Equal(t, http.StatusTooManyRequests, got.rec.Code)
		waitCalls(t, port, 2)
	})
	t.Run("identity unreadable", func(t *testing.T) {
		port := &fakePort{fn: byPolicy(nil)}
		cfg := shadowConfig(t, port)
		cfg.Subjects = subject.IdentifierFunc(func(*http.Request) (subject.Identity, error) { return subject.Identity{}, errors.New("no identity") })
		want := serveOnce(t, cfg, "/api/v1/ping")
		got := serveOnce(t, cfg, "/api/v1/new")
		assert.False(t, got.ran)
		assert.Equal(t, want.rec.Code, got.rec.Code, "refused as a request of an enforced route")
		assert.Empty(t, port.requests(), "no subject, no call")
	})
}

// TestShadowDoesNotDelayTheResponse: a shadow call slower than the
// enforced one does not hold the response: the handler has run and the
// request is answered while the shadow call is still in flight, and the
// call's context ends at the enforced deadline, so its goroutine ends
// then (goleak checks none is left).
func TestShadowDoesNotDelayTheResponse(t *testing.T) {
	inShadow, shadowDone := make(chan struct{}), make(chan struct{})
	var shadowCtxDeadline time.Time
	port := &fakePort{}
	port.once.Do(func() {}) // the kit's Fake answers with the Func below
	port.fake.Func = func(ctx context.Context, r ratelimit.Request) ratelimit.Outcome {
		if r.PolicyID != "dark" {
			return byPolicy(nil)(r)
		}
		defer close(shadowDone)
		shadowCtxDeadline, _ = ctx.Deadline()
		close(inShadow)
		<-ctx.Done() // a provider that takes its whole deadline
		return ratelimit.Indeterminate{PolicyID: "dark", Category: ratelimit.CategoryTimeout}
	}
	cfg := shadowConfig(t, port)
	cfg.Routes = []Route{{Pattern: "GET /api/v1/ping", Policy: "per-second"}, {Pattern: "GET /api/v1/ping", Policy: "dark"}}
	cfg.Now = time.Now
	start := time.Now()
	got := serveOnce(t, cfg, "/api/v1/ping")
	answered := time.Since(start)
	require.True(t, got.ran)
	select {
	case <-shadowDone:
		t.Fatalf("the shadow call returned before the response; the test proves nothing")
	default:
	}
	assert.Less(t, answered, cfg.Timeout, "answered before the shadow call's deadline")
	select {
	case <-inShadow:
	case <-time.After(2 * time.Second):
		t.Fatal("the shadow call never started")
	}
	select {
	case <-shadowDone:
	case <-time.After(cfg.Timeout + 2*time.Second):
		t.Fatal("the shadow call outlived its deadline")
	}
	enforced := port.requests()[0]
	assert.Equal(t, enforced.Deadline, shadowCtxDeadline, "the shadow context ends at the enforced deadline")
}

// TestShadowCarriesNoEvaluationID: on a route whose enforced policy has a
// dedup window, the Idempotency-Key is the enforced call's only: the same
// evaluation ID under the shadow policy would be a dedup conflict.
func TestShadowCarriesNoEvaluationID(t *testing.T) {
	port := &fakePort{fn: byPolicy(nil)}
	cfg := shadowConfig(t, port)
	cfg.Policies = append(cfg.Policies, mustPolicy(t, ratelimit.PolicySpec{ID: "idem", Revision: 1, Algorithm: ratelimit.AlgorithmFixedWindow,
		Params: ratelimit.FixedWindow{Limit: 10, Window: time.Second}, MaxCost: 5, CleanupGrace: time.Second,
		FailurePolicy: ratelimit.FailClosed, DedupWindow: time.Minute}))
	cfg.Routes = []Route{{Pattern: "POST /api/v1/pay", Policy: "idem"}, {Pattern: "POST /api/v1/pay", Policy: "dark"}}
	m, err := New(cfg)
	require.NoError(t, err)
	req := httptest.NewRequest(http.MethodPost, "/api/v1/pay", nil)
	req.Header.Set(IdempotencyKeyHeader, "abc123")
	rec := httptest.NewRecorder()
	m.Wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})).ServeHTTP(rec, req)
	require.Equal(t, http.StatusOK, rec.Code)
	calls := waitCalls(t, port, 2)
	assert.NotEmpty(t, calls["idem"].EvaluationID)
	assert.Empty(t, calls["dark"].EvaluationID)
}

func TestShadowConfig(t *testing.T) {
	port := &fakePort{fn: byPolicy(nil)}
	t.Run("a shadow default policy is refused", func(t *testing.T) {
		cfg := shadowConfig(t, port)
		cfg.DefaultPolicy = "dark"
		_, err := New(cfg)
		require.ErrorIs(t, err, ErrInvalidConfig)
		assert.Contains(t, err.Error(), `DefaultPolicy: policy "dark" is a shadow policy`)
	})
	t.Run("a shadow policy twice on a pattern", func(t *testing.T) {
		cfg := shadowConfig(t, port)
		cfg.Routes = append(cfg.Routes, Route{Pattern: "GET /api/v1/new", Policy: "dark"})
		_, err := New(cfg)
		require.ErrorIs(t, err, ErrInvalidConfig)
		assert.Contains(t, err.Error(), `Routes[7].Pattern: policy "dark" is already mapped to this pattern`)
	})
	t.Run("without Policies every route is enforced", func(t *testing.T) {
		cfg := shadowConfig(t, port)
		cfg.Policies = nil
		cfg.Routes = []Route{{Pattern: "GET /api/v1/new", Policy: "dark"}}
		got := serveOnce(t, cfg, "/api/v1/new")
		assert.True(t, got.ran)
		assert.NotEmpty(t, got.rec.Header().Get("RateLimit"), "enforced: its fields are sent")
	})
}
