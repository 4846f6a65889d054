package config

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLoadDerivedDefaults: an unset APP_WEB_EVALUATION_TIMEOUT follows the
// command timeout and an unset APP_RATE_LIMIT_MAX_IN_FLIGHT the pool size;
// an explicit value that breaks the relation is an error naming both
// variables.
func TestLoadDerivedDefaults(t *testing.T) {
	cfg, err := Load(with(enabledEnv(), "APP_RATE_LIMIT_COMMAND_TIMEOUT", "3s", "APP_RATE_LIMIT_POOL_SIZE", "10"))
	require.NoError(t, err)
	assert.Equal(t, 6*time.Second, cfg.Web.EvaluationTimeout, "EvaluationTimeoutFactor x the command timeout")
	assert.Equal(t, 10, cfg.RateLimit.MaxInFlight, "the pool size")

	cfg, err = Load(with(enabledEnv(), "APP_RATE_LIMIT_COMMAND_TIMEOUT", "10s"))
	require.NoError(t, err)
	assert.Equal(t, 20*time.Second, cfg.Web.EvaluationTimeout, "the largest command timeout still derives a valid deadline")

	cfg, err = Load(with(enabledEnv(), "APP_WEB_EVALUATION_TIMEOUT", "300ms", "APP_RATE_LIMIT_MAX_IN_FLIGHT", "5"))
	require.NoError(t, err)
	assert.Equal(t, 300*time.Millisecond, cfg.Web.EvaluationTimeout, "an explicit value is kept")
	assert.Equal(t, 5, cfg.RateLimit.MaxInFlight)

	cfg, err = Load(map[string]string{})
	require.NoError(t, err)
	assert.Equal(t, DefaultEvaluationTimeout, cfg.Web.EvaluationTimeout, "limiter off: the fixed default")

	for _, tt := range []struct {
		name      string
		env       map[string]string
		variable  string
		mentioned string
	}{
		{"explicit evaluation timeout below a larger command timeout",
			with(enabledEnv(), "APP_RATE_LIMIT_COMMAND_TIMEOUT", "2s", "APP_WEB_EVALUATION_TIMEOUT", "1s"),
			"APP_WEB_EVALUATION_TIMEOUT", "APP_RATE_LIMIT_COMMAND_TIMEOUT (2s)"},
		{"explicit max in flight above a smaller pool",
			with(enabledEnv(), "APP_RATE_LIMIT_POOL_SIZE", "8", "APP_RATE_LIMIT_MAX_IN_FLIGHT", "9"),
			"APP_RATE_LIMIT_MAX_IN_FLIGHT", "APP_RATE_LIMIT_POOL_SIZE (8)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(tt.env)
			ves := VarErrors(err)
			require.Len(t, ves, 1, "%v", err)
			assert.Equal(t, tt.variable, ves[0].Var)
			assert.ErrorIs(t, err, ErrInvalid)
			assert.Contains(t, err.Error(), tt.mentioned)
		})
	}
}

// noLookup fails the test if a name is resolved: IP literals and localhost
// never need DNS.
func noLookup(t *testing.T) lookupFunc {
	return func(_ context.Context, host string) ([]string, error) {
		t.Errorf("looked up %q", host)
		return nil, errors.New("no lookup expected")
	}
}

// fakeDNS resolves from a table; any other name does not resolve.
func fakeDNS(table map[string][]string) lookupFunc {
	return func(_ context.Context, host string) ([]string, error) {
		if a, ok := table[host]; ok {
			return a, nil
		}
		return nil, &errNoHost{host}
	}
}

type errNoHost struct{ host string }

func (e *errNoHost) Error() string { return "no such host " + e.host }

func TestSameEndpoint(t *testing.T) {
	literal := []struct {
		a, b string
		same bool
	}{
		{"127.0.0.1:6390", "127.0.0.1:6390", true},
		{"127.0.0.1:6390", "[::1]:6390", true},
		{"127.0.0.2:6390", "[::1]:6390", true},
		{"[::ffff:127.0.0.1]:6390", "127.0.0.1:6390", true},
		{"localhost:6390", "[::1]:6390", true},
		{"LOCALHOST.:6390", "127.0.0.1:6390", true},
		{":6390", "127.0.0.1:6390", true},
		{"0.0.0.0:6390", "[::1]:6390", true},
		{"127.0.0.1:06390", "127.0.0.1:6390", true},
		{"[fe80::1%eth0]:6390", "[fe80::1]:6390", true},
		{"[::ffff:10.0.0.5]:6379", "10.0.0.5:6379", true},
		{"127.0.0.1:6390", "[::1]:6391", false},
		{"10.0.0.5:6379", "10.0.0.6:6379", false},
		{"10.0.0.5:6379", "127.0.0.1:6379", false},
	}
	for _, tt := range literal {
		assert.Equal(t, tt.same, sameEndpoint(tt.a, tt.b, noLookup(t)), "%s vs %s", tt.a, tt.b)
		assert.Equal(t, tt.same, sameEndpoint(tt.b, tt.a, noLookup(t)), "%s vs %s", tt.b, tt.a)
	}

	dns := fakeDNS(map[string][]string{
		"redis-a.internal": {"10.0.0.5"},
		"redis-b.internal": {"10.0.0.6", "fd00::6"},
		"cache.internal":   {"fd00::6"},
		"alias.internal":   {"::1"},
	})
	named := []struct {
		a, b string
		same bool
	}{
		{"redis-a.internal:6379", "10.0.0.5:6379", true},
		{"redis-b.internal:6379", "cache.internal:6379", true},
		{"alias.internal:6379", "127.0.0.1:6379", true},
		{"Redis-A.internal:6379", "redis-a.internal.:6379", true},
		{"redis-a.internal:6379", "redis-b.internal:6379", false},
		{"redis-a.internal:6379", "10.0.0.5:6380", false},
		{"unknown.internal:6379", "redis-a.internal:6379", false},
		{"unknown.internal:6379", "UNKNOWN.internal:6379", true},
	}
	for _, tt := range named {
		assert.Equal(t, tt.same, sameEndpoint(tt.a, tt.b, dns), "%s vs %s", tt.a, tt.b)
		assert.Equal(t, tt.same, sameEndpoint(tt.b, tt.a, dns), "%s vs %s", tt.b, tt.a)
	}
}

// TestLoadDedicatedEndpoint: the coordination endpoint may not reach the
// cache's server, compared as resolved endpoints, whether or not the cache
// is enabled; APP_RATE_LIMIT_ALLOW_SHARED_REDIS=true accepts it.
func TestLoadDedicatedEndpoint(t *testing.T) {
	dns := fakeDNS(map[string][]string{"cache.internal": {"127.0.0.1"}})
	for _, tt := range []struct {
		name string
		env  map[string]string
	}{
		{"ipv4 vs ipv6 loopback, cache on", with(enabledEnv(), "APP_CACHE_ENABLED", "true", "APP_CACHE_REDIS_ADDR", "[::1]:6390", "APP_CACHE_REDIS_KEY_SECRET", cacheSecret)},
		{"ipv4 vs ipv6 loopback, cache off", with(enabledEnv(), "APP_CACHE_REDIS_ADDR", "[::1]:6390")},
		{"name resolving to the same address, cache off", with(enabledEnv(), "APP_CACHE_REDIS_ADDR", "cache.internal:6390")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := load(tt.env, dns)
			ves := VarErrors(err)
			require.Len(t, ves, 1, "%v", err)
			assert.Equal(t, "APP_RATE_LIMIT_REDIS_ADDR", ves[0].Var)
			assert.ErrorIs(t, err, ErrSharedRedis)
			assert.Contains(t, err.Error(), "APP_CACHE_REDIS_ADDR ("+tt.env["APP_CACHE_REDIS_ADDR"]+")")

			cfg, err := load(with(tt.env, "APP_RATE_LIMIT_ALLOW_SHARED_REDIS", "true"), dns)
			require.NoError(t, err)
			assert.True(t, cfg.RateLimit.AllowSharedRedis)
		})
	}
	cfg, err := load(with(enabledEnv(), "APP_CACHE_REDIS_ADDR", "[::1]:6391"), noLookup(t))
	require.NoError(t, err, "another port is another server")
	assert.False(t, cfg.Cache.Enabled)
}

// TestLoadDerivedEvaluationTimeoutWithDedup: with a policy that has a dedup
// window, the derived evaluation timeout leaves one command timeout more,
// for the retry of a lost reply (ADR 0017); an explicit value is kept.
func TestLoadDerivedEvaluationTimeoutWithDedup(t *testing.T) {
	file := writeFile(t, "policies.json", `{"policies":[{"id":"api","revision":1,"algorithm":"fixed_window","limit":10,"window":"1m","maxCost":1,"cleanupGrace":"1m","maxClockRegression":"2s","failurePolicy":"fail-closed","dedupWindow":"10m"}]}`)
	cfg, err := Load(with(enabledEnv(), "APP_RATE_LIMIT_POLICIES_FILE", file))
	require.NoError(t, err)
	assert.Equal(t, 250*time.Millisecond, cfg.RateLimit.CommandTimeout)
	assert.Equal(t, DedupEvaluationTimeoutFactor*cfg.RateLimit.CommandTimeout, cfg.Web.EvaluationTimeout)
	assert.Equal(t, 750*time.Millisecond, cfg.Web.EvaluationTimeout, "the documented default (README)")

	cfg, err = Load(with(enabledEnv(), "APP_RATE_LIMIT_POLICIES_FILE", file, "APP_WEB_EVALUATION_TIMEOUT", "400ms"))
	require.NoError(t, err)
	assert.Equal(t, 400*time.Millisecond, cfg.Web.EvaluationTimeout, "an explicit value is kept")
}

// That the defaults are redisrate's and the derived timeout its
// EvaluationTimeout is pinned in app-bootstrap/wiring
// (TestDefaultTimeoutsAreRedisratesDefaults, TestConfigBounds): config
// imports no adapter, not even in tests (ADR 0036).
