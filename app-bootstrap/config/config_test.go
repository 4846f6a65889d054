package config

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/shared-contract/keyspace"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

const (
	keySecret     = "k-secret-0123456789abcdefghijklmnopqrstuv" // 41 bytes
	subjectSecret = "s-secret-0123456789abcdefghijklmnopqrstuv"
	cacheSecret   = "c-secret-0123456789abcdefghijklmnopqrstuv"
	redisPassword = "p4ssw0rd-never-printed"
)

// enabledEnv is a minimal valid environment with the Redis limiter on.
func enabledEnv() map[string]string {
	return map[string]string{
		"APP_RATE_LIMIT_ENABLED":        "true",
		"APP_RATE_LIMIT_PROVIDER":       "redis",
		"APP_RATE_LIMIT_REDIS_ADDR":     "127.0.0.1:6390",
		"APP_RATE_LIMIT_KEY_SECRET":     keySecret,
		"APP_RATE_LIMIT_DEFAULT_POLICY": "api",
		"APP_RATE_LIMIT_POLICIES_FILE":  examplePolicies,
		"APP_WEB_SUBJECT_SECRET":        subjectSecret,
	}
}

// examplePolicies is the example policy file (api and login), the same as
// the embedded DefaultPoliciesJSON.
const examplePolicies = "../examples/policies.json"

func with(base map[string]string, kv ...string) map[string]string {
	out := make(map[string]string, len(base)+len(kv)/2)
	for k, v := range base {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == "<unset>" {
			delete(out, kv[i])
			continue
		}
		out[kv[i]] = kv[i+1]
	}
	return out
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
	return p
}

func TestLoadDefaults(t *testing.T) {
	cfg, err := Load(map[string]string{})
	require.NoError(t, err)
	assert.False(t, cfg.RateLimit.Enabled, "rate limit is off by default")
	assert.Equal(t, RateLimit{}, cfg.RateLimit, "a disabled limiter keeps nothing")
	assert.False(t, cfg.Cache.Enabled)
	assert.Equal(t, ":8080", cfg.Web.Addr)
	assert.True(t, cfg.Web.LocalLimit.Enabled, "local limiter is on by default")
	assert.Equal(t, 10.0, cfg.Web.LocalLimit.Rate)
	assert.Equal(t, 20, cfg.Web.LocalLimit.Burst)
	assert.Equal(t, 10000, cfg.Web.LocalLimit.MaxClients)
	assert.Equal(t, 5*time.Minute, cfg.Web.LocalLimit.IdleTTL)
	assert.Equal(t, 500*time.Millisecond, cfg.Web.EvaluationTimeout)
	assert.Empty(t, cfg.Web.TrustedProxies)
	assert.Equal(t, 64, cfg.Web.IPv6Prefix, "a /64 is one client by default")
	assert.Empty(t, cfg.Web.AdminAddr, "no admin listener by default")
	assert.True(t, cfg.Web.SubjectSecret.IsZero())
	assert.Equal(t, LogAuto, cfg.Log.Format)
	assert.Equal(t, slog.LevelInfo, cfg.Log.Level)
	assert.Equal(t, 15*time.Second, cfg.ShutdownTimeout)
}

func TestLoadDisabledIgnoresRateLimitVariables(t *testing.T) {
	// With the limiter off, its variables are not even validated: a
	// disabled capability must not fail start-up.
	cfg, err := Load(map[string]string{
		"APP_RATE_LIMIT_PROVIDER":   "memcached",
		"APP_RATE_LIMIT_REDIS_ADDR": "not an address",
		"APP_RATE_LIMIT_KEY_SECRET": "short",
	})
	require.NoError(t, err)
	assert.False(t, cfg.RateLimit.Enabled)
}

func TestLoadEnabled(t *testing.T) {
	cfg, err := Load(enabledEnv())
	require.NoError(t, err)
	r := cfg.RateLimit
	assert.True(t, r.Enabled)
	assert.Equal(t, "127.0.0.1:6390", r.Redis.Addr)
	assert.Nil(t, r.Redis.TLSConfig())
	assert.Equal(t, "tlb", r.KeyPrefix)
	assert.Equal(t, len(keySecret), r.KeySecret.Len())
	assert.Equal(t, 250*time.Millisecond, r.CommandTimeout)
	assert.Equal(t, 250*time.Millisecond, r.DialTimeout)
	assert.Equal(t, 250*time.Millisecond, r.PoolTimeout)
	assert.Equal(t, 64, r.MaxInFlight)
	assert.Equal(t, 64, r.PoolSize)
	assert.Equal(t, ratelimit.PolicyID("api"), r.DefaultPolicy)
	assert.Equal(t, examplePolicies, r.PoliciesSource)
	assert.Equal(t, []string{"api", "login"}, r.Policies.IDs())
	assert.Equal(t, []Route{{"GET /api/", "api"}, {"POST /api/v1/login", "login"}}, r.Policies.Routes)
	assert.Equal(t, len(subjectSecret), cfg.Web.SubjectSecret.Len())
}

func TestLoadPoliciesFile(t *testing.T) {
	env := with(enabledEnv(), "APP_RATE_LIMIT_POLICIES_FILE", "testdata/policies.json", "APP_RATE_LIMIT_DEFAULT_POLICY", "search")
	cfg, err := Load(env)
	require.NoError(t, err)
	assert.Equal(t, "testdata/policies.json", cfg.RateLimit.PoliciesSource)
	assert.Equal(t, []string{"api", "login", "search"}, cfg.RateLimit.Policies.IDs())
	p, ok := cfg.RateLimit.Policies.Policy("search")
	require.True(t, ok)
	assert.Equal(t, ratelimit.SlidingWindowCounter{Limit: 30, Window: 10 * time.Second}, p.Params())
	assert.Equal(t, time.Duration(0), p.MaxClockRegression())
}

// TestLoadRejections: each broken setting fails start-up with exactly one
// error naming the variable, and the message says why.
func TestLoadRejections(t *testing.T) {
	badPolicies := writeFile(t, "p.json", `{"policies":[{"id":"api","revision":1,"algorithm":"fixed_window","limit":5,"window":"1m",
		"maxCost":1,"cleanupGrace":"1m","maxClockRegression":"2s","failurePolicy":"fail-closed","bucketSize":3}]}`)
	dupPolicies := writeFile(t, "dup.json", `{"policies":[{"id":"api","revision":1,"algorithm":"fixed_window","limit":5,"window":"1m",
		"maxCost":1,"cleanupGrace":"1m","maxClockRegression":"2s","failurePolicy":"fail-closed","limit":500}]}`)
	casePolicies := writeFile(t, "case.json", `{"policies":[{"id":"api","revision":1,"algorithm":"fixed_window","limit":5,"window":"1m",
		"MAXCOST":1,"cleanupGrace":"1m","maxClockRegression":"2s","failurePolicy":"fail-closed"}]}`)
	tests := []struct {
		name     string
		env      map[string]string
		variable string
		sentinel error
		contains string
	}{
		{"provider missing", with(enabledEnv(), "APP_RATE_LIMIT_PROVIDER", "<unset>"), "APP_RATE_LIMIT_PROVIDER", ErrRequired, `set it to "redis"`},
		{"provider unsupported", with(enabledEnv(), "APP_RATE_LIMIT_PROVIDER", "memcached"), "APP_RATE_LIMIT_PROVIDER", ErrUnsupported, `"memcached"`},
		{"role unsupported", with(enabledEnv(), "APP_RATE_LIMIT_ROLE", "cache"), "APP_RATE_LIMIT_ROLE", ErrUnsupported, `only role is "coordination"`},
		{"failure policy open", with(enabledEnv(), "APP_RATE_LIMIT_FAILURE_POLICY", "fail-open"), "APP_RATE_LIMIT_FAILURE_POLICY", ErrUnsupported, "only fails closed"},
		{"no default policy", with(enabledEnv(), "APP_RATE_LIMIT_DEFAULT_POLICY", "<unset>"), "APP_RATE_LIMIT_DEFAULT_POLICY", ErrRequired, "name the policy"},
		{"default policy undefined", with(enabledEnv(), "APP_RATE_LIMIT_DEFAULT_POLICY", "nope"), "APP_RATE_LIMIT_DEFAULT_POLICY", ErrInvalid, `"nope" is not defined in ../examples/policies.json (defined: api, login)`},
		{"no coordination address", with(enabledEnv(), "APP_RATE_LIMIT_REDIS_ADDR", "<unset>"), "APP_RATE_LIMIT_REDIS_ADDR", ErrRequired, "no redis address"},
		{"coordination address malformed", with(enabledEnv(), "APP_RATE_LIMIT_REDIS_ADDR", "localhost"), "APP_RATE_LIMIT_REDIS_ADDR", ErrInvalid, "want host:port"},
		{"key secret missing", with(enabledEnv(), "APP_RATE_LIMIT_KEY_SECRET", "<unset>"), "APP_RATE_LIMIT_KEY_SECRET", ErrRequired, "at least 32 bytes"},
		{"key secret short", with(enabledEnv(), "APP_RATE_LIMIT_KEY_SECRET", strings.Repeat("x", 31)), "APP_RATE_LIMIT_KEY_SECRET", keyspace.ErrSecretTooShort, "31 bytes, need at least 32"},
		{"key prefix invalid", with(enabledEnv(), "APP_RATE_LIMIT_KEY_PREFIX", "Bad:Prefix"), "APP_RATE_LIMIT_KEY_PREFIX", ErrInvalid, `"Bad:Prefix"`},
		{"subject secret missing", with(enabledEnv(), "APP_WEB_SUBJECT_SECRET", "<unset>"), "APP_WEB_SUBJECT_SECRET", ErrRequired, "at least 32 bytes"},
		{"subject secret short", with(enabledEnv(), "APP_WEB_SUBJECT_SECRET", "short"), "APP_WEB_SUBJECT_SECRET", keyspace.ErrSecretTooShort, "5 bytes"},
		{"command timeout zero", with(enabledEnv(), "APP_RATE_LIMIT_COMMAND_TIMEOUT", "0s"), "APP_RATE_LIMIT_COMMAND_TIMEOUT", ErrInvalid, "want a positive duration"},
		{"command timeout sub-millisecond", with(enabledEnv(), "APP_RATE_LIMIT_COMMAND_TIMEOUT", "500us"), "APP_RATE_LIMIT_COMMAND_TIMEOUT", ErrInvalid, "at least 1ms"},
		{"command timeout negative", with(enabledEnv(), "APP_RATE_LIMIT_COMMAND_TIMEOUT", "-1s"), "APP_RATE_LIMIT_COMMAND_TIMEOUT", ErrInvalid, "want a positive duration"},
		{"command timeout huge", with(enabledEnv(), "APP_RATE_LIMIT_COMMAND_TIMEOUT", "2h", "APP_WEB_EVALUATION_TIMEOUT", "30s"), "APP_RATE_LIMIT_COMMAND_TIMEOUT", ErrInvalid, "at most 10s"},
		{"command timeout not a duration", with(enabledEnv(), "APP_RATE_LIMIT_COMMAND_TIMEOUT", "inf"), "APP_RATE_LIMIT_COMMAND_TIMEOUT", ErrInvalid, `"inf"`},
		{"dial timeout above command timeout", with(enabledEnv(), "APP_RATE_LIMIT_DIAL_TIMEOUT", "1s"), "APP_RATE_LIMIT_DIAL_TIMEOUT", ErrInvalid, "exceeds APP_RATE_LIMIT_COMMAND_TIMEOUT"},
		{"pool timeout above command timeout", with(enabledEnv(), "APP_RATE_LIMIT_POOL_TIMEOUT", "1s"), "APP_RATE_LIMIT_POOL_TIMEOUT", ErrInvalid, "exceeds APP_RATE_LIMIT_COMMAND_TIMEOUT"},
		{"max in flight zero", with(enabledEnv(), "APP_RATE_LIMIT_MAX_IN_FLIGHT", "0"), "APP_RATE_LIMIT_MAX_IN_FLIGHT", ErrInvalid, "want 1..1024"},
		{"max in flight above pool", with(enabledEnv(), "APP_RATE_LIMIT_MAX_IN_FLIGHT", "100"), "APP_RATE_LIMIT_MAX_IN_FLIGHT", ErrInvalid, "exceeds APP_RATE_LIMIT_POOL_SIZE"},
		{"max in flight not a number", with(enabledEnv(), "APP_RATE_LIMIT_MAX_IN_FLIGHT", "lots"), "APP_RATE_LIMIT_MAX_IN_FLIGHT", ErrInvalid, `"lots"`},
		{"pool size negative", with(enabledEnv(), "APP_RATE_LIMIT_POOL_SIZE", "-3", "APP_RATE_LIMIT_MAX_IN_FLIGHT", "1"), "APP_RATE_LIMIT_POOL_SIZE", ErrInvalid, "-3"},
		{"evaluation timeout not above command timeout", with(enabledEnv(), "APP_WEB_EVALUATION_TIMEOUT", "250ms"), "APP_WEB_EVALUATION_TIMEOUT", ErrInvalid, "must exceed APP_RATE_LIMIT_COMMAND_TIMEOUT"},
		{"enabled not a bool", with(enabledEnv(), "APP_RATE_LIMIT_ENABLED", "yes please"), "APP_RATE_LIMIT_ENABLED", ErrInvalid, `"yes please"`},
		{"policies file unset", with(enabledEnv(), "APP_RATE_LIMIT_POLICIES_FILE", "<unset>"), "APP_RATE_LIMIT_POLICIES_FILE", ErrRequired, "needs a policy file"},
		{"policies file empty", with(enabledEnv(), "APP_RATE_LIMIT_POLICIES_FILE", ""), "APP_RATE_LIMIT_POLICIES_FILE", ErrRequired, "needs a policy file"},
		{"policies file duplicate key", with(enabledEnv(), "APP_RATE_LIMIT_POLICIES_FILE", dupPolicies), "APP_RATE_LIMIT_POLICIES_FILE", ErrPolicyFile, dupPolicies + `: invalid policy file: policies[0] (api): duplicate key "limit"`},
		{"policies file wrong case", with(enabledEnv(), "APP_RATE_LIMIT_POLICIES_FILE", casePolicies), "APP_RATE_LIMIT_POLICIES_FILE", ErrPolicyFile, casePolicies + `: invalid policy file: policies[0] (api): key "MAXCOST" is not "maxCost"`},
		{"policies file missing", with(enabledEnv(), "APP_RATE_LIMIT_POLICIES_FILE", "/nonexistent/p.json"), "APP_RATE_LIMIT_POLICIES_FILE", ErrPolicyFile, "no such file"},
		{"policies file invalid", with(enabledEnv(), "APP_RATE_LIMIT_POLICIES_FILE", badPolicies), "APP_RATE_LIMIT_POLICIES_FILE", ErrPolicyFile, `unknown field "bucketSize"`},
		{"insecure skip verify", with(enabledEnv(), "APP_RATE_LIMIT_REDIS_TLS_ENABLED", "true", "APP_RATE_LIMIT_REDIS_TLS_INSECURE_SKIP_VERIFY", "true"), "APP_RATE_LIMIT_REDIS_TLS_INSECURE_SKIP_VERIFY", ErrUnsupported, "cannot be disabled"},
		{"tls file without tls", with(enabledEnv(), "APP_RATE_LIMIT_REDIS_TLS_CA_FILE", "/etc/ca.pem"), "APP_RATE_LIMIT_REDIS_TLS_CA_FILE", ErrConflict, "APP_RATE_LIMIT_REDIS_TLS_ENABLED is false"},
		{"tls cert without key", with(enabledEnv(), "APP_RATE_LIMIT_REDIS_TLS_ENABLED", "true", "APP_RATE_LIMIT_REDIS_TLS_CERT_FILE", "/etc/c.pem"), "APP_RATE_LIMIT_REDIS_TLS_KEY_FILE", ErrRequired, "CERT_FILE is set"},
		{"tls ca unreadable", with(enabledEnv(), "APP_RATE_LIMIT_REDIS_TLS_ENABLED", "true", "APP_RATE_LIMIT_REDIS_TLS_CA_FILE", "/nonexistent/ca.pem"), "APP_RATE_LIMIT_REDIS_TLS_CA_FILE", ErrInvalid, "no such file"},
		{"shared redis", with(enabledEnv(), "APP_CACHE_ENABLED", "true", "APP_CACHE_REDIS_ADDR", "127.0.0.1:6390", "APP_CACHE_REDIS_KEY_SECRET", cacheSecret), "APP_RATE_LIMIT_REDIS_ADDR", ErrSharedRedis, "APP_RATE_LIMIT_ALLOW_SHARED_REDIS=true"},
		{"shared redis via localhost", with(enabledEnv(), "APP_CACHE_ENABLED", "true", "APP_CACHE_REDIS_ADDR", "localhost:6390", "APP_CACHE_REDIS_KEY_SECRET", cacheSecret), "APP_RATE_LIMIT_REDIS_ADDR", ErrSharedRedis, "reaches the same server as APP_CACHE_REDIS_ADDR (localhost:6390)"},
		{"cache without address", map[string]string{"APP_CACHE_ENABLED": "true", "APP_CACHE_REDIS_KEY_SECRET": cacheSecret}, "APP_CACHE_REDIS_ADDR", ErrRequired, "no redis address"},
		{"cache without secret", map[string]string{"APP_CACHE_ENABLED": "true", "APP_CACHE_REDIS_ADDR": "127.0.0.1:6391"}, "APP_CACHE_REDIS_KEY_SECRET", ErrRequired, "HMAC secret"},
		{"cache db out of range", map[string]string{"APP_CACHE_ENABLED": "true", "APP_CACHE_REDIS_ADDR": "127.0.0.1:6391", "APP_CACHE_REDIS_KEY_SECRET": cacheSecret, "APP_CACHE_REDIS_DB": "99"}, "APP_CACHE_REDIS_DB", ErrInvalid, "want 0..15"},
		{"web addr malformed", map[string]string{"APP_WEB_ADDR": "8080"}, "APP_WEB_ADDR", ErrInvalid, "want [host]:port"},
		{"trusted proxy malformed", map[string]string{"APP_WEB_TRUSTED_PROXIES": "10.0.0.0/8, nonsense"}, "APP_WEB_TRUSTED_PROXIES", ErrInvalid, `"nonsense"`},
		{"trusted proxy ipv4 wildcard", map[string]string{"APP_WEB_TRUSTED_PROXIES": "10.0.0.0/8,0.0.0.0/0"}, "APP_WEB_TRUSTED_PROXIES", ErrInvalid, `"0.0.0.0/0" trusts every address`},
		{"trusted proxy ipv6 wildcard", map[string]string{"APP_WEB_TRUSTED_PROXIES": "::/0"}, "APP_WEB_TRUSTED_PROXIES", ErrInvalid, `"::/0" trusts every address`},
		{"trusted proxy unmasked wildcard", map[string]string{"APP_WEB_TRUSTED_PROXIES": "10.1.2.3/0"}, "APP_WEB_TRUSTED_PROXIES", ErrInvalid, "trusts every address"},
		{"trusted proxy mapped wildcard", map[string]string{"APP_WEB_TRUSTED_PROXIES": "::ffff:0.0.0.0/96"}, "APP_WEB_TRUSTED_PROXIES", ErrInvalid, "trusts every address"},
		{"ipv6 prefix too short", map[string]string{"APP_WEB_IPV6_PREFIX": "31"}, "APP_WEB_IPV6_PREFIX", ErrInvalid, "want 32..128"},
		{"ipv6 prefix too long", map[string]string{"APP_WEB_IPV6_PREFIX": "129"}, "APP_WEB_IPV6_PREFIX", ErrInvalid, "want 32..128"},
		{"ipv6 prefix zero", map[string]string{"APP_WEB_IPV6_PREFIX": "0"}, "APP_WEB_IPV6_PREFIX", ErrInvalid, "want 32..128"},
		{"ipv6 prefix not an integer", map[string]string{"APP_WEB_IPV6_PREFIX": "/64"}, "APP_WEB_IPV6_PREFIX", ErrInvalid, ""},
		{"admin addr malformed", map[string]string{"APP_WEB_ADMIN_ADDR": "9090"}, "APP_WEB_ADMIN_ADDR", ErrInvalid, "want [host]:port"},
		{"admin addr is the public addr", map[string]string{"APP_WEB_ADDR": "127.0.0.1:8080", "APP_WEB_ADMIN_ADDR": "127.0.0.1:8080"}, "APP_WEB_ADMIN_ADDR", ErrConflict, "needs its own address"},
		{"local rate NaN", map[string]string{"APP_WEB_LOCAL_LIMIT_RATE": "NaN"}, "APP_WEB_LOCAL_LIMIT_RATE", ErrInvalid, "finite rate"},
		{"local rate Inf", map[string]string{"APP_WEB_LOCAL_LIMIT_RATE": "+Inf"}, "APP_WEB_LOCAL_LIMIT_RATE", ErrInvalid, "finite rate"},
		{"local rate zero", map[string]string{"APP_WEB_LOCAL_LIMIT_RATE": "0"}, "APP_WEB_LOCAL_LIMIT_RATE", ErrInvalid, "finite rate"},
		{"local burst zero", map[string]string{"APP_WEB_LOCAL_LIMIT_BURST": "0"}, "APP_WEB_LOCAL_LIMIT_BURST", ErrInvalid, "want 1.."},
		{"local max clients zero", map[string]string{"APP_WEB_LOCAL_LIMIT_MAX_CLIENTS": "0"}, "APP_WEB_LOCAL_LIMIT_MAX_CLIENTS", ErrInvalid, "want 1.."},
		{"local idle ttl shorter than refill", map[string]string{"APP_WEB_LOCAL_LIMIT_RATE": "1", "APP_WEB_LOCAL_LIMIT_BURST": "600"}, "APP_WEB_LOCAL_LIMIT_IDLE_TTL", ErrInvalid, "shorter than the bucket refill time"},
		{"log format", map[string]string{"APP_LOG_FORMAT": "xml"}, "APP_LOG_FORMAT", ErrUnsupported, "want json, text or auto"},
		{"log level", map[string]string{"APP_LOG_LEVEL": "loud"}, "APP_LOG_LEVEL", ErrInvalid, "want debug"},
		{"shutdown timeout zero", map[string]string{"APP_SHUTDOWN_TIMEOUT": "0s"}, "APP_SHUTDOWN_TIMEOUT", ErrInvalid, "positive duration"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(tt.env)
			require.Error(t, err)
			ves := VarErrors(err)
			require.Len(t, ves, 1, "want exactly one problem, got: %v", err)
			assert.Equal(t, tt.variable, ves[0].Var)
			assert.ErrorIs(t, err, tt.sentinel)
			msg := err.Error()
			assert.True(t, strings.HasPrefix(msg, tt.variable+": "), "message %q must start with the variable", msg)
			assert.Contains(t, msg, tt.contains)
			assert.NotContains(t, msg, "\n", "one failure is one line")
			for _, s := range []string{keySecret, subjectSecret, cacheSecret} {
				assert.NotContains(t, msg, s)
			}
		})
	}
}

func TestLoadPolicyFileProblemsOnePerLine(t *testing.T) {
	file := writeFile(t, "p.json", `{"policies":[{"id":"api","revision":1}]}`)
	_, err := Load(with(enabledEnv(), "APP_RATE_LIMIT_POLICIES_FILE", file))
	require.Error(t, err)
	lines := strings.Split(err.Error(), "\n")
	require.Len(t, lines, 5, "five missing fields; the default policy cannot be checked: %v", err)
	for _, l := range lines[:5] {
		assert.True(t, strings.HasPrefix(l, "APP_RATE_LIMIT_POLICIES_FILE: "+file+": "), l)
	}
	assert.Contains(t, lines[4], `policies[0] (api): "algorithm" is required`)
}

func TestLoadSharedRedisOptIn(t *testing.T) {
	env := with(enabledEnv(), "APP_CACHE_ENABLED", "true", "APP_CACHE_REDIS_ADDR", "127.0.0.1:6390",
		"APP_CACHE_REDIS_KEY_SECRET", cacheSecret, "APP_RATE_LIMIT_ALLOW_SHARED_REDIS", "true")
	cfg, err := Load(env)
	require.NoError(t, err)
	assert.True(t, cfg.RateLimit.AllowSharedRedis)
	assert.Equal(t, cfg.RateLimit.Redis.Addr, cfg.Cache.Redis.Addr)

	// A different port is a different server: no opt-in needed.
	env = with(enabledEnv(), "APP_CACHE_ENABLED", "true", "APP_CACHE_REDIS_ADDR", "127.0.0.1:6391", "APP_CACHE_REDIS_KEY_SECRET", cacheSecret)
	cfg, err = Load(env)
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1:6391", cfg.Cache.Redis.Addr)
	assert.Equal(t, 100*time.Millisecond, cfg.Cache.CommandTimeout)
	assert.Equal(t, 16, cfg.Cache.PoolSize)
}

func TestLoadCollectsEveryProblem(t *testing.T) {
	_, err := Load(map[string]string{
		"APP_RATE_LIMIT_ENABLED":  "true",
		"APP_RATE_LIMIT_PROVIDER": "redis",
	})
	require.Error(t, err)
	var vars []string
	for _, ve := range VarErrors(err) {
		vars = append(vars, ve.Var)
	}
	assert.Equal(t, []string{"APP_RATE_LIMIT_REDIS_ADDR", "APP_RATE_LIMIT_KEY_SECRET", "APP_RATE_LIMIT_POLICIES_FILE", "APP_RATE_LIMIT_DEFAULT_POLICY", "APP_WEB_SUBJECT_SECRET"}, vars)
	assert.Len(t, strings.Split(err.Error(), "\n"), 5, "one line per problem")
}

func TestFromEnviron(t *testing.T) {
	m := FromEnviron([]string{"A=1", "B==2", "C", "D="})
	assert.Equal(t, map[string]string{"A": "1", "B": "=2", "D": ""}, m)
}

func TestVarErrorsNil(t *testing.T) {
	assert.Empty(t, VarErrors(nil))
	assert.Empty(t, VarErrors(errors.New("plain")))
}
