package wiring

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"
	"go.uber.org/goleak"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
	"github.com/tech-log/tech-log-backend/app-bootstrap/config"
	"github.com/tech-log/tech-log-backend/shared-contract/cache"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// optionalPort captures the EdgePort if the graph has one.
type optionalPort struct {
	fx.In
	Edge ratelimit.EdgePort `optional:"true"`
}

type optionalStore struct {
	fx.In
	Store cache.Store `optional:"true"`
}

func TestValidateApp(t *testing.T) {
	tests := []struct {
		name string
		kv   []string
	}{
		{"disabled", nil},
		{"rate limit", enabledKV("127.0.0.1:1")},
		{"cache only", []string{"APP_CACHE_ENABLED", "true", "APP_CACHE_REDIS_ADDR", "127.0.0.1:2", "APP_CACHE_REDIS_KEY_SECRET", testCacheSecret}},
		{"both", append(enabledKV("127.0.0.1:1"), "APP_CACHE_ENABLED", "true", "APP_CACHE_REDIS_ADDR", "127.0.0.1:2", "APP_CACHE_REDIS_KEY_SECRET", testCacheSecret)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := loadConfig(t, tt.kv...)
			require.NoError(t, fx.ValidateApp(Options(cfg, quietLogger())))
		})
	}
}

// TestDisabledModeCreatesNoRedis is the disabled-mode proof: with the rate
// limiter and the cache off, but their addresses pointing at a listener,
// the running service never connects there, leaves no goroutine behind
// after stop, and its graph holds no EdgePort and no cache.Store.
func TestDisabledModeCreatesNoRedis(t *testing.T) {
	defer goleak.VerifyNone(t)
	wouldBe := newQuietListener(t)
	cfg := loadConfig(t,
		"APP_RATE_LIMIT_REDIS_ADDR", wouldBe.Addr(),
		"APP_RATE_LIMIT_KEY_SECRET", testKeySecret,
		"APP_RATE_LIMIT_PROVIDER", "redis",
		"APP_CACHE_REDIS_ADDR", wouldBe.Addr(),
		"APP_CACHE_REDIS_KEY_SECRET", testCacheSecret,
	)
	require.False(t, cfg.RateLimit.Enabled)
	require.False(t, cfg.Cache.Enabled)

	var port optionalPort
	var store optionalStore
	var srv *Server
	app := fxtest.New(t, Options(cfg, quietLogger()),
		fx.Invoke(func(p optionalPort, s optionalStore) { port, store = p, s }),
		fx.Populate(&srv))
	app.RequireStart()
	assert.Nil(t, port.Edge, "no EdgePort in disabled mode")
	assert.Nil(t, store.Store, "no cache.Store with the cache off")

	base := "http://" + srv.Addr()
	resp, body := do(t, http.MethodGet, base+PathPing)
	assert.Equal(t, http.StatusOK, resp.StatusCode, body)
	assert.Empty(t, resp.Header.Get("RateLimit-Limit"), "no edge middleware without a port")
	resp, _ = do(t, http.MethodGet, base+PathReadyz)
	assert.Equal(t, http.StatusOK, resp.StatusCode, "ready with nothing to check")
	app.RequireStop()

	assert.False(t, wouldBe.Accepted(t), "disabled mode connected to the would-be redis address")

	// And the graph really lacks the type: requiring it fails.
	err := fx.New(Options(cfg, quietLogger()), fx.NopLogger, fx.Invoke(func(ratelimit.EdgePort) {})).Err()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "missing type: ratelimit.EdgePort")
}

// TestEnabledGraphStartsAndStops runs the whole graph against a private
// redis-server: the port evaluates, the HTTP edge answers with RateLimit
// fields, /readyz is ready, and stop leaves no goroutine behind.
func TestEnabledGraphStartsAndStops(t *testing.T) {
	rs := redistest.Start(t)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	cfg := loadConfig(t, enabledKV(rs.Addr())...)

	var port optionalPort
	var srv *Server
	app := fxtest.New(t, Options(cfg, quietLogger()), fx.Invoke(func(p optionalPort) { port = p }), fx.Populate(&srv))
	app.RequireStart()
	require.NotNil(t, port.Edge)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out := port.Edge.Evaluate(ctx, ratelimit.Request{PolicyID: "login", SubjectDigest: "direct-port-subject-0001", Cost: 1, Deadline: time.Now().Add(2 * time.Second)})
	require.True(t, ratelimit.Admitted(out), "%v", out)
	ev := out.(ratelimit.Evaluated)
	assert.Equal(t, int64(5), ev.Decision.Limit)
	assert.Equal(t, int64(4), ev.Decision.Remaining)

	base := "http://" + srv.Addr()
	resp, body := do(t, http.MethodGet, base+PathPing)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	assert.Equal(t, "100", resp.Header.Get("RateLimit-Limit"), "GET /api/ maps to the api policy")
	assert.NotEmpty(t, resp.Header.Get("RateLimit-Policy"))
	resp, _ = do(t, http.MethodGet, base+PathReadyz)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	resp, body = do(t, http.MethodGet, base+PathMetrics)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Contains(t, body, `tlb_ratelimit_outcomes_total{category="none",decision="allowed",kind="evaluated",policy="api"} 1`)
	assert.Contains(t, body, `tlb_ratelimit_outcomes_total{category="none",decision="allowed",kind="evaluated",policy="login"} 1`)
	app.RequireStop()

	// After stop the provider is closed: a late call fails closed.
	late := port.Edge.Evaluate(context.Background(), ratelimit.Request{PolicyID: "login", SubjectDigest: "direct-port-subject-0001", Cost: 1, Deadline: time.Now().Add(2 * time.Second)})
	assert.False(t, ratelimit.Admitted(late))
	assert.Equal(t, ratelimit.CategoryClosed, ratelimit.CategoryOf(late))
}

// TestEnabledWithRedisDownFailsClosed: a coordination server that cannot be
// reached at start does not stop the service; it is not ready and every
// limited route answers 503 problem+json.
func TestEnabledWithRedisDownFailsClosed(t *testing.T) {
	down := newQuietListener(t)
	addr := down.Addr()
	require.NoError(t, down.ln.Close()) // nothing listens there now
	cfg := loadConfig(t, enabledKV(addr)...)
	var srv *Server
	app := fxtest.New(t, Options(cfg, quietLogger()), fx.Populate(&srv))
	app.RequireStart()
	defer app.RequireStop()

	base := "http://" + srv.Addr()
	resp, body := do(t, http.MethodGet, base+PathPing)
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"))
	assert.NotEmpty(t, resp.Header.Get("Retry-After"))
	var problem map[string]any
	require.NoError(t, json.Unmarshal([]byte(body), &problem), body)
	assert.Equal(t, "unavailable", problem["outcome"], body)
	assert.Equal(t, "connection", problem["category"], body)

	resp, _ = do(t, http.MethodGet, base+PathReadyz)
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	resp, _ = do(t, http.MethodGet, base+PathHealthz)
	assert.Equal(t, http.StatusOK, resp.StatusCode, "alive even when not ready")
}

// TestCacheOnlyNeverYieldsEdgePort: enabling the cache builds a cache.Store
// against its own server and never an EdgePort.
func TestCacheOnlyNeverYieldsEdgePort(t *testing.T) {
	rs := redistest.Start(t)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	cfg := loadConfig(t, "APP_CACHE_ENABLED", "true", "APP_CACHE_REDIS_ADDR", rs.Addr(), "APP_CACHE_REDIS_KEY_SECRET", testCacheSecret)
	require.False(t, cfg.RateLimit.Enabled)

	var port optionalPort
	var store optionalStore
	app := fxtest.New(t, Options(cfg, quietLogger()), fx.Invoke(func(p optionalPort, s optionalStore) { port, store = p, s }))
	app.RequireStart()
	assert.Nil(t, port.Edge, "a cache-only config must not yield an EdgePort")
	require.NotNil(t, store.Store)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	key := cache.Key{Region: "wiring", Kind: "test", Name: "k"}
	require.NoError(t, store.Store.Set(ctx, key, []byte("v"), time.Minute))
	e, ok, err := store.Store.Get(ctx, key)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, "v", string(e.Value))
	app.RequireStop()
}

// TestCacheFailOpenCounted: with the cache server gone, reads are misses
// and every failure is counted on /metrics.
func TestCacheFailOpenCounted(t *testing.T) {
	rs := redistest.Start(t)
	cfg := loadConfig(t, "APP_CACHE_ENABLED", "true", "APP_CACHE_REDIS_ADDR", rs.Addr(), "APP_CACHE_REDIS_KEY_SECRET", testCacheSecret)
	var store optionalStore
	var srv *Server
	app := fxtest.New(t, Options(cfg, quietLogger()), fx.Invoke(func(s optionalStore) { store = s }), fx.Populate(&srv))
	app.RequireStart()
	defer app.RequireStop()
	rs.Kill()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, ok, err := store.Store.Get(ctx, cache.Key{Region: "wiring", Kind: "test", Name: "k"})
	require.NoError(t, err, "fail-open turns the failure into a miss")
	assert.False(t, ok)
	_, body := do(t, http.MethodGet, "http://"+srv.Addr()+PathMetrics)
	assert.Contains(t, body, `tlb_cache_fail_open_total{op="get"} 1`)
}

func TestStartFailsOnBusyPort(t *testing.T) {
	busy := newQuietListener(t)
	cfg := loadConfig(t, "APP_WEB_ADDR", busy.Addr())
	app := fx.New(Options(cfg, quietLogger()), fx.NopLogger)
	err := app.Start(context.Background())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "APP_WEB_ADDR")
}

func TestFatalStartError(t *testing.T) {
	assert.False(t, fatalStartError(context.DeadlineExceeded))
}

func TestNewLogger(t *testing.T) {
	var b strings.Builder
	NewLogger(config.Log{Format: config.LogJSON}, &b).Info("hello", "k", "v")
	assert.True(t, strings.HasPrefix(b.String(), "{"), b.String())
	b.Reset()
	NewLogger(config.Log{Format: config.LogText}, &b).Info("hello", "k", "v")
	assert.Contains(t, b.String(), "msg=hello k=v")
	b.Reset()
	NewLogger(config.Log{Format: config.LogAuto}, &b).Info("hello")
	assert.True(t, strings.HasPrefix(b.String(), "{"), "auto is JSON when not a terminal")
}

// TestRecoversWhenRedisComesBack: a service started while its coordination
// Redis is down runs the start-up checks on a later readiness probe and
// then admits again, without a restart.
func TestRecoversWhenRedisComesBack(t *testing.T) {
	rs := redistest.Start(t)
	rs.Require(t, redistest.CapKill, redistest.CapRestart)
	rs.Kill()
	cfg := loadConfig(t, enabledKV(rs.Addr())...)
	var srv *Server
	app := fxtest.New(t, Options(cfg, quietLogger()), fx.Populate(&srv))
	app.RequireStart()
	defer app.RequireStop()
	base := "http://" + srv.Addr()
	resp, _ := do(t, http.MethodGet, base+PathReadyz)
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	resp, _ = do(t, http.MethodGet, base+PathPing)
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)

	rs.Restart()
	resp, _ = do(t, http.MethodGet, base+PathReadyz)
	assert.Equal(t, http.StatusOK, resp.StatusCode, "the readiness probe ran the start-up checks")
	resp, body := do(t, http.MethodGet, base+PathPing)
	assert.Equal(t, http.StatusOK, resp.StatusCode, body)
}

// TestEnabledBreakerOpensWithRedisDown: with the coordination server
// unreachable, APP_RATE_LIMIT_BREAKER_THRESHOLD connection failures open
// the breaker: limited routes then answer 503 circuit_open, /readyz names
// the open breaker in its detail and /metrics shows the state and the trip.
func TestEnabledBreakerOpensWithRedisDown(t *testing.T) {
	down := newQuietListener(t)
	addr := down.Addr()
	require.NoError(t, down.ln.Close())
	cfg := loadConfig(t, append(enabledKV(addr),
		"APP_RATE_LIMIT_BREAKER_THRESHOLD", "2",
		"APP_RATE_LIMIT_BREAKER_PROBE_INTERVAL", "1m")...)
	var srv *Server
	app := fxtest.New(t, Options(cfg, quietLogger()), fx.Populate(&srv))
	app.RequireStart()
	defer app.RequireStop()

	base := "http://" + srv.Addr()
	category := func() string {
		resp, body := do(t, http.MethodGet, base+PathPing)
		require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
		var problem map[string]any
		require.NoError(t, json.Unmarshal([]byte(body), &problem), body)
		return fmt.Sprint(problem["category"])
	}
	assert.Equal(t, "connection", category())
	assert.Equal(t, "connection", category())
	assert.Equal(t, "circuit_open", category())

	resp, body := do(t, http.MethodGet, base+PathReadyz)
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.Contains(t, body, "circuit breaker open")
	assert.NotContains(t, body, addr)
	_, body = do(t, http.MethodGet, base+PathMetrics)
	assert.Contains(t, body, `tlb_ratelimit_breaker_state{state="open"} 1`)
	assert.Contains(t, body, `tlb_ratelimit_breaker_state{state="closed"} 0`)
	assert.Contains(t, body, `tlb_ratelimit_breaker_trips_total 1`)
	assert.Contains(t, body, `tlb_ratelimit_outcomes_total{category="circuit_open",decision="fail_closed",kind="unavailable",policy="api"} 1`)
}

// TestEnabledLocalFallbackDecidesWhileRedisIsDown: a local-fallback
// policy (limit 4, 2 instances: share 2) with the coordination server
// unreachable: the first request fails closed while the breaker counts
// (threshold 1), then the instance decides locally: 2 admits, then 429;
// the instance stays ready, and /metrics counts the local decisions.
func TestEnabledLocalFallbackDecidesWhileRedisIsDown(t *testing.T) {
	down := newQuietListener(t)
	addr := down.Addr()
	require.NoError(t, down.ln.Close())
	file := filepath.Join(t.TempDir(), "policies.json")
	require.NoError(t, os.WriteFile(file, []byte(`{"policies":[{"id":"api","revision":1,"algorithm":"fixed_window","limit":4,"window":"1h",
		"maxCost":1,"cleanupGrace":"1m","maxClockRegression":"2s","failurePolicy":"local-fallback","fallbackInstances":2,"routes":["GET /api/"]}]}`), 0o600))
	cfg := loadConfig(t, append(enabledKV(addr),
		"APP_RATE_LIMIT_POLICIES_FILE", file,
		"APP_RATE_LIMIT_BREAKER_THRESHOLD", "1",
		"APP_RATE_LIMIT_BREAKER_PROBE_INTERVAL", "1m")...)
	var srv *Server
	app := fxtest.New(t, Options(cfg, quietLogger()), fx.Populate(&srv))
	app.RequireStart()
	defer app.RequireStop()

	base := "http://" + srv.Addr()
	var codes []int
	for range 4 {
		resp, _ := do(t, http.MethodGet, base+PathPing)
		codes = append(codes, resp.StatusCode)
	}
	// The first call is the connection failure that opens the breaker;
	// it is Unavailable{connection}, decided locally as well.
	assert.Equal(t, []int{200, 200, 429, 429}, codes)
	resp, _ := do(t, http.MethodGet, base+PathReadyz)
	assert.Equal(t, http.StatusOK, resp.StatusCode, "ready: local decisions are served")
	_, body := do(t, http.MethodGet, base+PathMetrics)
	assert.Contains(t, body, `tlb_ratelimit_fallback_decisions_total{decision="allowed",policy="api"} 2`)
	assert.Contains(t, body, `tlb_ratelimit_fallback_decisions_total{decision="denied",policy="api"} 2`)
	assert.Contains(t, body, `tlb_ratelimit_outcomes_total{category="local_emergency",decision="allowed",kind="evaluated",policy="api"} 2`)
	assert.Contains(t, body, `tlb_ratelimit_fallback_pending{policy="api"} 2`, "the 2 local admissions, not charged while Redis is down")
	assert.Contains(t, body, "tlb_ratelimit_fallback_subjects 1")
	assert.Contains(t, body, "tlb_ratelimit_fallback_max_subjects ")
	assert.Contains(t, body, "tlb_ratelimit_fallback_dropped_total 0")
	assert.Contains(t, body, "tlb_ratelimit_fallback_charge_failures_total ")
}
