package config

import (
	"bytes"
	"context"
	"errors"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// FuzzParsePolicies: any byte string is either a policy set whose every
// policy NewPolicy accepted, with unique IDs and routes naming known
// policies, or a *PolicyFileError whose every problem wraps ErrPolicyFile.
// It never panics. Seeds: the embedded file, the example file and broken
// variants of both.
func FuzzParsePolicies(f *testing.F) {
	seeds := []string{
		DefaultPoliciesJSON(),
		`{"policies": []}`,
		`{"policies": [{"id": "a", "revision": 1, "algorithm": "sliding_window_counter", "limit": 3, "window": "1s", "maxCost": 1, "cleanupGrace": "1s", "maxClockRegression": "0s", "failurePolicy": "fail-closed"}]}`,
		`{"policies": [{"id": "a", "revision": 1, "algorithm": "token_bucket", "capacity": 9007199254740991, "refillTokens": 1, "refillPeriod": "1ms", "maxCost": 1, "cleanupGrace": "1ms", "maxClockRegression": "0s", "failurePolicy": "fail-closed"}]}`,
		`{"policies": [{"id": "a", "revision": 1, "algorithm": "fixed_window", "limit": 1, "window": "1500us", "maxCost": 1, "cleanupGrace": "1s", "maxClockRegression": "1s", "failurePolicy": "fail-open", "dedup": true}]}`,
		`{"policies": [{"id": "a", "routes": ["GET /a/", "GET /a/"]}, {"id": "a"}]} trailing`,
		`{"policies": null}`,
		`[]`,
		``,
	}
	if b, err := os.ReadFile("testdata/policies.json"); err == nil {
		seeds = append(seeds, string(b))
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		set, err := ParsePolicies(bytes.NewReader(data))
		if err != nil {
			var pfe *PolicyFileError
			if !errors.As(err, &pfe) || len(pfe.Problems) == 0 {
				t.Fatalf("error %T is not a *PolicyFileError with problems: %v", err, err)
			}
			for i, p := range pfe.Problems {
				if !errors.Is(p, ErrPolicyFile) {
					t.Fatalf("problem %d does not wrap ErrPolicyFile: %v", i, p)
				}
			}
			if len(set.Policies) != 0 || len(set.Routes) != 0 {
				t.Fatalf("a failed parse returned %d policies, %d routes", len(set.Policies), len(set.Routes))
			}
			return
		}
		ids := map[ratelimit.PolicyID]bool{}
		for i, p := range set.Policies {
			if p.IsZero() {
				t.Fatalf("policies[%d] was not built by NewPolicy", i)
			}
			if ids[p.ID()] {
				t.Fatalf("duplicate policy %q accepted", p.ID())
			}
			ids[p.ID()] = true
			if fp := p.FailurePolicy(); fp != ratelimit.FailClosed && (fp != ratelimit.LocalFallback || p.FallbackShare() < 1) {
				t.Fatalf("policy %q accepted with failure policy %v", p.ID(), p.FailurePolicy())
			}
		}
		patterns := map[string]bool{}
		for _, r := range set.Routes {
			if !ids[r.Policy] {
				t.Fatalf("route %q names unknown policy %q", r.Pattern, r.Policy)
			}
			if patterns[r.Pattern] {
				t.Fatalf("duplicate route %q accepted", r.Pattern)
			}
			patterns[r.Pattern] = true
		}
	})
}

// fuzzVars are the variables FuzzLoad sets from its inputs: every kind of
// value Load parses (bool, int, float, duration, address, secret, policy ID,
// prefix list), none of them a _FILE variable, so that the fuzzer never
// makes Load read a file.
var fuzzVars = []string{
	"APP_RATE_LIMIT_ENABLED",
	"APP_RATE_LIMIT_REDIS_ADDR",
	"APP_RATE_LIMIT_COMMAND_TIMEOUT",
	"APP_RATE_LIMIT_POOL_SIZE",
	"APP_RATE_LIMIT_MAX_IN_FLIGHT",
	"APP_RATE_LIMIT_KEY_PREFIX",
	"APP_RATE_LIMIT_DEFAULT_POLICY",
	"APP_WEB_TRUSTED_PROXIES",
	"APP_WEB_LOCAL_LIMIT_RATE",
	"APP_CACHE_ENABLED",
	"APP_CACHE_REDIS_ADDR",
	"APP_WEB_IPV6_PREFIX",
	"APP_WEB_ADMIN_ADDR",
}

// FuzzLoad: whatever values the variables hold, Load never panics; it
// either returns a Config that keeps the documented invariants or an error
// whose every problem is a *VarError naming an APP_ variable, and neither
// the error nor the Config's String ever contains the key secret. Each
// input is split on '\x00' into the values of fuzzVars, over a valid
// enabled configuration. Names are never resolved (offlineLookup): a name
// is compared as a name.
func FuzzLoad(f *testing.F) {
	join := func(v ...string) string { return strings.Join(v, "\x00") }
	f.Add(join("true", "127.0.0.1:6390", "250ms", "64", "64", "tlb", "api", "10.0.0.0/8", "10", "true", "127.0.0.1:6391", "64", "127.0.0.1:9090"))
	f.Add(join("true", "127.0.0.1:6390", "0.5ms", "0", "65", "TLB", "nope", "10.0.0.0/33,x", "NaN", "true", "127.0.0.1:6390", "31", "9090"))
	f.Add(join("false", "", "-1s", "1025", "-1", ":", "", "", "+Inf", "yes", ""))
	f.Add(join("TRUE", "[::1]:6379", "10s", "1024", "1", "a.b-c_d", "login", "::1/128, 192.0.2.1, ::/0", "1e-300", "true", "[::1]:6379", "x", "[::1]:0"))
	f.Add(join("1", "host", "1h", "9999999999999999999", "1", strings.Repeat("p", 70), strings.Repeat("x", 65), ",,,", "0", "false", "redis:6379"))
	f.Fuzz(func(t *testing.T, in string) {
		env := enabledEnv()
		env["APP_CACHE_REDIS_KEY_SECRET"] = cacheSecret
		vals := strings.Split(in, "\x00")
		for i, name := range fuzzVars {
			if i < len(vals) && vals[i] != "" {
				env[name] = vals[i]
			}
		}
		cfg, err := load(env, offlineLookup)
		if err != nil {
			// A value the fuzzer set may be echoed; the secret was not one.
			if !strings.Contains(in, keySecret) && strings.Contains(err.Error(), keySecret) {
				t.Fatalf("the error shows the key secret: %v", err)
			}
			ves := VarErrors(err)
			if len(ves) == 0 {
				t.Fatalf("error without a *VarError: %v", err)
			}
			for _, ve := range ves {
				if !strings.HasPrefix(ve.Var, Prefix) {
					t.Fatalf("problem names %q, not an %s variable: %v", ve.Var, Prefix, ve)
				}
			}
			return
		}
		if s := cfg.String(); !strings.Contains(in, keySecret[:16]) && !strings.Contains(in, subjectSecret[:16]) &&
			(strings.Contains(s, keySecret) || strings.Contains(s, subjectSecret)) {
			t.Fatalf("String shows a secret: %s", s)
		}
		for _, p := range cfg.Web.TrustedProxies {
			if p.Bits() == 0 {
				t.Fatalf("wildcard trusted proxy %s accepted", p)
			}
		}
		if b := cfg.Web.IPv6Prefix; b < 32 || b > 128 {
			t.Fatalf("ipv6 prefix %d accepted", b)
		}
		rl := cfg.RateLimit
		if !rl.Enabled {
			return
		}
		if rl.Redis.Addr == "" || rl.KeySecret.IsZero() || cfg.Web.SubjectSecret.IsZero() {
			t.Fatalf("enabled without an address or a secret: %s", cfg)
		}
		if rl.MaxInFlight < 1 || rl.MaxInFlight > rl.PoolSize || rl.PoolSize > 1024 {
			t.Fatalf("bounds accepted: max in flight %d, pool %d", rl.MaxInFlight, rl.PoolSize)
		}
		if rl.CommandTimeout <= 0 || rl.DialTimeout > rl.CommandTimeout || rl.PoolTimeout > rl.CommandTimeout ||
			cfg.Web.EvaluationTimeout <= rl.CommandTimeout {
			t.Fatalf("timeouts accepted: command %v, dial %v, pool %v, evaluation %v",
				rl.CommandTimeout, rl.DialTimeout, rl.PoolTimeout, cfg.Web.EvaluationTimeout)
		}
		if _, ok := rl.Policies.Policy(rl.DefaultPolicy); !ok {
			t.Fatalf("default policy %q is not in the policy file", rl.DefaultPolicy)
		}
		if c := env["APP_CACHE_REDIS_ADDR"]; c != "" && !rl.AllowSharedRedis && sameEndpoint(rl.Redis.Addr, c, offlineLookup) {
			t.Fatalf("coordination %s and cache %s share a server without the opt-in", rl.Redis.Addr, c)
		}
		if ll := cfg.Web.LocalLimit; ll.Enabled && !(ll.Rate > 0 && !math.IsInf(ll.Rate, 0) && !math.IsNaN(ll.Rate)) {
			t.Fatalf("local limit rate %v accepted", ll.Rate)
		}
	})
}

// offlineLookup resolves nothing, so that fuzzing never touches DNS.
func offlineLookup(_ context.Context, host string) ([]string, error) {
	return nil, &errNoHost{host}
}
