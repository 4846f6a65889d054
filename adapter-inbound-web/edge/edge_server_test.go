package edge

import (
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

func TestConfigValidate(t *testing.T) {
	fixed := mustPolicy(t, ratelimit.PolicySpec{ID: "api", Revision: 1, Algorithm: ratelimit.AlgorithmFixedWindow,
		Params: ratelimit.FixedWindow{Limit: 100, Window: time.Minute}, MaxCost: 1, CleanupGrace: time.Second,
		FailurePolicy: ratelimit.FailClosed})
	tests := []struct {
		name   string
		mutate func(*Config)
		field  string
	}{
		{name: "valid", mutate: func(*Config) {}},
		{name: "no port", mutate: func(c *Config) { c.Port = nil }, field: "Port"},
		{name: "no subjects", mutate: func(c *Config) { c.Subjects = nil }, field: "Subjects"},
		{name: "no pseudonymizer", mutate: func(c *Config) { c.Pseudonymizer = nil }, field: "Pseudonymizer"},
		{name: "no default policy", mutate: func(c *Config) { c.DefaultPolicy = "" }, field: "DefaultPolicy"},
		{name: "bad default policy", mutate: func(c *Config) { c.DefaultPolicy = "Not Valid" }, field: "DefaultPolicy"},
		{name: "bad route policy", mutate: func(c *Config) { c.Routes = []Route{{Pattern: "/a", Policy: "UPPER"}} }, field: "Routes[0].Policy"},
		{name: "empty route pattern", mutate: func(c *Config) { c.Routes = []Route{{Pattern: "", Policy: "api"}} }, field: "Routes[0].Pattern"},
		{name: "invalid route pattern", mutate: func(c *Config) { c.Routes = []Route{{Pattern: "GET api", Policy: "api"}} }, field: "Routes[0].Pattern"},
		{name: "duplicate patterns", mutate: func(c *Config) {
			c.Routes = []Route{{Pattern: "GET /a", Policy: "api"}, {Pattern: "GET /a", Policy: "api"}}
		}, field: "Routes[1].Pattern"},
		{name: "conflicting patterns", mutate: func(c *Config) {
			c.Routes = []Route{{Pattern: "GET /a/{x}", Policy: "api"}, {Pattern: "GET /{y}/b", Policy: "api"}}
		}, field: "Routes[1].Pattern"},
		{name: "exempt duplicates a route", mutate: func(c *Config) {
			c.Routes = []Route{{Pattern: "GET /healthz", Policy: "api"}}
			c.Exempt = []string{"GET /healthz"}
		}, field: "Exempt[0]"},
		{name: "empty exempt", mutate: func(c *Config) { c.Exempt = []string{""} }, field: "Exempt[0]"},
		{name: "zero timeout", mutate: func(c *Config) { c.Timeout = 0 }, field: "Timeout"},
		{name: "huge timeout", mutate: func(c *Config) { c.Timeout = MaxTimeout + 1 }, field: "Timeout"},
		{name: "zero policy", mutate: func(c *Config) { c.Policies = []ratelimit.Policy{{}} }, field: "Policies[0]"},
		{name: "duplicate policy", mutate: func(c *Config) { c.Policies = []ratelimit.Policy{fixed, fixed} }, field: "Policies[1]"},
		{name: "route policy not among policies", mutate: func(c *Config) {
			c.Policies = []ratelimit.Policy{fixed}
			c.Routes = []Route{{Pattern: "/x", Policy: "other"}}
		}, field: "Routes[0].Policy"},
		{name: "default policy not among policies", mutate: func(c *Config) {
			c.Policies = []ratelimit.Policy{fixed}
			c.DefaultPolicy = "other"
		}, field: "DefaultPolicy"},
		{name: "too many patterns", mutate: func(c *Config) { c.Exempt = make([]string, MaxRoutes+1) }, field: "max"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := baseConfig(t, &fakePort{}, t0)
			tt.mutate(&cfg)
			m, err := New(cfg)
			if tt.field == "" {
				require.NoError(t, err)
				require.NotNil(t, m)
				return
			}
			require.ErrorIs(t, err, ErrInvalidConfig)
			assert.Contains(t, err.Error(), tt.field)
			assert.Nil(t, m)
		})
	}
	assert.Panics(t, func() {
		m, err := New(baseConfig(t, &fakePort{}, t0))
		require.NoError(t, err)
		m.Wrap(nil)
	})
}

func TestConcurrentRequests(t *testing.T) {
	var n atomic.Int64
	port := &fakePort{fn: func(ratelimit.Request) ratelimit.Outcome {
		if n.Add(1)%2 == 0 {
			return decision(false, 10, 0, time.Second, time.Second)
		}
		return decision(true, 10, 1, 0, time.Second)
	}}
	cfg := baseConfig(t, port, t0)
	cfg.Routes = []Route{{Pattern: "POST /api/v1/login", Policy: "login"}}
	m, err := New(cfg)
	require.NoError(t, err)
	var calls atomic.Int64
	h := m.Wrap(okHandler(&calls))
	var wg sync.WaitGroup
	var denied atomic.Int64
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				method := http.MethodGet
				if (g+i)%3 == 0 {
					method = http.MethodPost
				}
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest(method, "/api/v1/login", nil))
				if rec.Code == 429 {
					denied.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, int64(400), calls.Load()+denied.Load())
	assert.Equal(t, int64(200), denied.Load())
}

func TestEndToEndServer(t *testing.T) {
	port := &fakePort{out: ratelimit.Indeterminate{PolicyID: "api", RetryAfter: 2500 * time.Millisecond, Category: ratelimit.CategoryTimeout}}
	cfg := baseConfig(t, port, t0)
	cfg.Now = nil // real clock: the deadline must lie in the future
	m, err := New(cfg)
	require.NoError(t, err)
	srv := httptest.NewServer(m.Wrap(http.NotFoundHandler()))
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL + "/api/v1/ping")
	require.NoError(t, err)
	defer resp.Body.Close()
	assert.Equal(t, 503, resp.StatusCode)
	assert.Equal(t, "3", resp.Header.Get("Retry-After"))
	var body map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
	assert.Equal(t, map[string]any{"type": "about:blank", "title": "rate limiter unavailable", "status": float64(503),
		"outcome": "indeterminate", "category": "timeout", "policy": "api"}, body)
	reqs := port.requests()
	require.Len(t, reqs, 1)
	assert.True(t, reqs[0].Deadline.After(time.Now().Add(-time.Minute)), "deadline is derived from the real clock")
}

// TestResetFromTheServerClock: the time to reset is the decision's own
// ResetAt - ServerNow; a skew between this host's clock and the
// coordination server's does not shift RateLimit-Reset or t (issue 15).
func TestResetFromTheServerClock(t *testing.T) {
	for _, skew := range []time.Duration{0, -time.Hour, time.Hour, 1500 * time.Millisecond, -1500 * time.Millisecond} {
		server := t0.Add(skew) // the server's clock when the app's reads t0
		port := &fakePort{out: ratelimit.Evaluated{Decision: ratelimit.Decision{
			Allowed: true, Limit: 10, Remaining: 4, ResetAt: server.Add(29500 * time.Millisecond), ServerNow: server,
			PolicyID: "api", PolicyRevision: 1, Source: ratelimit.GlobalRedis, Certainty: ratelimit.Certain,
		}}}
		m, err := New(baseConfig(t, port, t0))
		require.NoError(t, err)
		rec := httptest.NewRecorder()
		m.Wrap(http.NotFoundHandler()).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/x", nil))
		assert.Equal(t, "30", rec.Header().Get("RateLimit-Reset"), "skew %v", skew)
		assert.Equal(t, `"api";r=4;t=30`, rec.Header().Get("RateLimit"), "skew %v", skew)
	}

	// A reset at or before the server's now is t=0, never negative.
	port := &fakePort{out: ratelimit.Evaluated{Decision: ratelimit.Decision{
		Allowed: true, Limit: 10, Remaining: 10, ResetAt: t0.Add(-time.Second), ServerNow: t0,
		PolicyID: "api", PolicyRevision: 1, Source: ratelimit.GlobalRedis, Certainty: ratelimit.Certain,
	}}}
	m, err := New(baseConfig(t, port, t0.Add(-time.Hour)))
	require.NoError(t, err)
	rec := httptest.NewRecorder()
	m.Wrap(http.NotFoundHandler()).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/x", nil))
	assert.Equal(t, `"api";r=10;t=0`, rec.Header().Get("RateLimit"))
	assert.Equal(t, "0", rec.Header().Get("RateLimit-Reset"))
}

// TestFieldsFollowTheDecision: for decisions across the value ranges, the
// fields parse as the draft's structured fields and carry the decision's
// numbers: q = limit, r = remaining clamped to 0..q, t = the reset rounded
// up, never negative; the legacy fields agree; OmitLegacyFields drops them.
func TestFieldsFollowTheDecision(t *testing.T) {
	rateLimitRE := regexp.MustCompile(`^"api";r=(0|[1-9][0-9]{0,14});t=(0|[1-9][0-9]{0,14})$`)
	policyRE := regexp.MustCompile(`^"api";q=(0|[1-9][0-9]{0,14})$`)
	rng := rand.New(rand.NewPCG(16, 15))
	for _, legacy := range []bool{true, false} {
		var d ratelimit.Decision
		port := &fakePort{fn: func(ratelimit.Request) ratelimit.Outcome { return ratelimit.Evaluated{Decision: d} }}
		cfg := baseConfig(t, port, t0)
		cfg.OmitLegacyFields = !legacy
		m, err := New(cfg)
		require.NoError(t, err)
		h := m.Wrap(http.NotFoundHandler())
		for i := range 500 {
			limit := rng.Int64N(1_000_000)
			remaining := rng.Int64N(limit+3) - 1 // -1..limit+1: out-of-range values are clamped
			reset := time.Duration(rng.Int64N(int64(2*time.Hour))) - time.Minute
			d = ratelimit.Decision{Allowed: rng.IntN(2) == 0, Limit: limit, Remaining: remaining, RetryAfter: time.Second,
				ServerNow: t0.Add(time.Duration(rng.Int64N(int64(time.Hour)))), PolicyID: "api", PolicyRevision: 1,
				Source: ratelimit.GlobalRedis, Certainty: ratelimit.Certain}
			d.ResetAt = d.ServerNow.Add(reset)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/x", nil))
			rl := rateLimitRE.FindStringSubmatch(rec.Header().Get("RateLimit"))
			require.NotNil(t, rl, "case %d: RateLimit %q", i, rec.Header().Get("RateLimit"))
			pol := policyRE.FindStringSubmatch(rec.Header().Get("RateLimit-Policy"))
			require.NotNil(t, pol, "case %d: RateLimit-Policy %q", i, rec.Header().Get("RateLimit-Policy"))
			wantR := min(max(remaining, 0), limit)
			wantT := int64(0)
			if reset > 0 {
				wantT = int64((reset + time.Second - 1) / time.Second)
			}
			assert.Equal(t, strconv.FormatInt(limit, 10), pol[1], "case %d: q", i)
			assert.Equal(t, strconv.FormatInt(wantR, 10), rl[1], "case %d: r", i)
			assert.Equal(t, strconv.FormatInt(wantT, 10), rl[2], "case %d: t", i)
			if legacy {
				assert.Equal(t, pol[1], rec.Header().Get("RateLimit-Limit"))
				assert.Equal(t, rl[1], rec.Header().Get("RateLimit-Remaining"))
				assert.Equal(t, rl[2], rec.Header().Get("RateLimit-Reset"))
			} else {
				for _, f := range []string{"RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset"} {
					assert.Empty(t, rec.Header().Values(f), "case %d: %s is off", i, f)
				}
			}
		}
	}
}
