package ratelimiter_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redisrate"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
	"github.com/tech-log/tech-log-backend/app-bootstrap/config"
	"github.com/tech-log/tech-log-backend/app-bootstrap/ratelimiter"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit/ratelimittest"
)

const testSecret = "ratelimiter-test-secret-0123456789abcdef"

// prefix is a random key prefix, so that tests sharing a server never
// share state.
func prefix(t *testing.T) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return "t" + hex.EncodeToString(b)
}

func newLimiter(t *testing.T, opts ratelimiter.Options) *ratelimiter.Limiter {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := ratelimiter.New(ctx, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// TestConformance runs the conformance kit against the port the front
// door hands out (the service's decorator stack over the provider), every
// port of one run a front door of its own over one server, as instances
// share one Redis.
func TestConformance(t *testing.T) {
	srv := redistest.Start(t)
	p := prefix(t)
	newPort := func(t *testing.T, policies []ratelimit.Policy) ratelimit.EdgePort {
		ps := ratelimiter.Policies{}
		for _, pol := range policies {
			ps[string(pol.ID())] = ratelimiter.FromPolicy(pol)
		}
		return newLimiter(t, ratelimiter.Options{
			Addr: srv.Addr(), Secret: testSecret, KeyPrefix: p, Policies: ps,
			DefaultPolicy: string(policies[0].ID()),
		}).Limiter()
	}
	t.Run("single", func(t *testing.T) { ratelimittest.Run(t, newPort) })
	t.Run("sets", func(t *testing.T) { ratelimittest.RunSets(t, newPort) })
}

// TestTwoInstancesOneBudget: two front doors on one server with one
// Secret share one budget per subject; the subject is pseudonymized (its
// name is in no key).
func TestTwoInstancesOneBudget(t *testing.T) {
	srv := redistest.Start(t)
	opts := ratelimiter.Options{
		Addr: srv.Addr(), Secret: testSecret, KeyPrefix: prefix(t),
		Policies: ratelimiter.Policies{"orders": ratelimiter.TokenBucket(5, 5, time.Hour)},
	}
	a, b := newLimiter(t, opts), newLimiter(t, opts)
	ctx := context.Background()
	var allowed int
	for i := range 8 {
		l := a
		if i%2 == 1 {
			l = b
		}
		d, err := l.Allow(ctx, "orders", "customer-42")
		require.NoError(t, err, "request %d", i)
		if d.Allowed {
			allowed++
			assert.Equal(t, int64(5-allowed), d.Remaining, "request %d", i)
		} else {
			assert.Positive(t, d.RetryAfter, "a denial says when")
		}
		assert.Equal(t, int64(5), d.Limit)
		assert.Equal(t, ratelimit.GlobalRedis, d.Evaluated.Decision.Source)
	}
	assert.Equal(t, 5, allowed, "one budget across both instances")
	d, err := b.Allow(ctx, "orders", "customer-43")
	require.NoError(t, err)
	assert.True(t, d.Allowed, "another subject has its own budget")

	keys, err := srv.Client().Keys(ctx, "*").Result()
	require.NoError(t, err)
	require.NotEmpty(t, keys)
	for _, k := range keys {
		assert.NotContains(t, k, "customer", "the subject reaches Redis only as an HMAC")
	}
}

// TestFailClosedRedisGone: with the server killed, Allow is never
// allowed: every answer is an undecided error, and an *UnavailableError
// (nothing changed) comes within the breaker's threshold; the middleware
// answers 503 without calling the handler.
func TestFailClosedRedisGone(t *testing.T) {
	srv := redistest.Start(t)
	l := newLimiter(t, ratelimiter.Options{
		Addr: srv.Addr(), Secret: testSecret, KeyPrefix: prefix(t),
		Policies: ratelimiter.Policies{"api": ratelimiter.PerSecond(100)},
	})
	ctx := context.Background()
	d, err := l.Allow(ctx, "api", "s")
	require.NoError(t, err)
	require.True(t, d.Allowed)

	srv.Kill()
	var unavailable *ratelimiter.UnavailableError
	for i := 0; i < 2*redisrate.DefaultBreakerThreshold && unavailable == nil; i++ {
		d, err := l.Allow(ctx, "api", "s")
		require.Error(t, err, "call %d", i)
		assert.False(t, d.Allowed)
		assert.ErrorIs(t, err, ratelimiter.ErrUndecided)
		assert.NotContains(t, err.Error(), testSecret)
		errors.As(err, &unavailable)
	}
	require.NotNil(t, unavailable, "an unreachable server is Unavailable")
	assert.Positive(t, ratelimiter.RetryAfter(unavailable))

	called := false
	h := l.Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { called = true }))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/x", nil))
	assert.Equal(t, http.StatusServiceUnavailable, rec.Code)
	assert.False(t, called, "fail closed: the handler does not run")
	assert.Error(t, l.Ready(ctx))
}

// TestClientChecked: a caller's client is accepted only with the options
// the certainty rules need; otherwise New names the option.
func TestClientChecked(t *testing.T) {
	srv := redistest.Start(t)
	opts := func(c redis.UniversalClient) ratelimiter.Options {
		return ratelimiter.Options{Client: c, Secret: testSecret, KeyPrefix: prefix(t),
			Policies: ratelimiter.Policies{"api": ratelimiter.PerSecond(10)}}
	}
	ctx := context.Background()

	plain := redis.NewClient(&redis.Options{Addr: srv.Addr()}) // go-redis defaults: 3 retries
	t.Cleanup(func() { _ = plain.Close() })
	_, err := ratelimiter.New(ctx, opts(plain))
	require.ErrorIs(t, err, ratelimiter.ErrInvalidOptions)
	for _, want := range []string{"Options.Client", "MaxRetries", "DialerRetries", "ReadTimeout"} {
		assert.ErrorContains(t, err, want)
	}

	slow, err := redisrate.NewClient(redisrate.ClientConfig{
		Addr: srv.Addr(), Protocol: redisrate.ProtocolRESP2, CommandTimeout: time.Second,
		DialTimeout: 250 * time.Millisecond, PoolTimeout: 250 * time.Millisecond, PoolSize: 8,
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = slow.Close() })
	_, err = ratelimiter.New(ctx, opts(slow))
	require.ErrorIs(t, err, ratelimiter.ErrInvalidOptions)
	assert.ErrorContains(t, err, "ReadTimeout 1s and WriteTimeout 1s must equal CommandTimeout 250ms")
	assert.NotContains(t, err.Error(), "MaxRetries", "only the option at fault")

	good, err := redisrate.NewClient(redisrate.ClientConfig{
		Addr: srv.Addr(), Protocol: redisrate.ProtocolRESP2, CommandTimeout: redisrate.DefaultCommandTimeout,
		DialTimeout: redisrate.DefaultDialTimeout, PoolTimeout: 250 * time.Millisecond, PoolSize: 8,
	})
	require.NoError(t, err)
	l := newLimiter(t, opts(good))
	assert.Equal(t, 8, l.Config().RateLimit.MaxInFlight, "the client's pool bounds the evaluations")
	d, err := l.Allow(ctx, "api", "s")
	require.NoError(t, err)
	assert.True(t, d.Allowed)
}

// TestOptionsErrors: Options problems name the field (and the variable
// behind it), never a secret.
func TestOptionsErrors(t *testing.T) {
	ctx := context.Background()
	for name, tt := range map[string]struct {
		opts ratelimiter.Options
		want []string
	}{
		"empty": {ratelimiter.Options{}, []string{"Options.Addr: APP_RATE_LIMIT_REDIS_ADDR", "Options.Secret: APP_RATE_LIMIT_KEY_SECRET", "APP_RATE_LIMIT_POLICIES_FILE"}},
		"short secret": {ratelimiter.Options{Addr: "127.0.0.1:1", Secret: "short-secret",
			Policies: ratelimiter.Policies{"api": ratelimiter.PerSecond(1)}}, []string{"Options.Secret"}},
		"two defaults": {ratelimiter.Options{Addr: "127.0.0.1:1", Secret: testSecret,
			Policies: ratelimiter.Policies{"a": ratelimiter.PerSecond(1), "b": ratelimiter.PerMinute(1)}}, []string{"Options.DefaultPolicy: APP_RATE_LIMIT_DEFAULT_POLICY"}},
		"bad policy": {ratelimiter.Options{Addr: "127.0.0.1:1", Secret: testSecret,
			Policies: ratelimiter.Policies{"api": ratelimiter.PerSecond(0)}}, []string{"Options.Policies", "policies[0] (api)"}},
		"bad timeout": {ratelimiter.Options{Addr: "127.0.0.1:1", Secret: testSecret,
			Policies: ratelimiter.Policies{"api": ratelimiter.PerSecond(1)},
			Env:      map[string]string{"APP_RATE_LIMIT_DIAL_TIMEOUT": "1s"}}, []string{"APP_RATE_LIMIT_DIAL_TIMEOUT"}},
		"conflict": {ratelimiter.Options{Addr: "127.0.0.1:1", Secret: testSecret,
			Policies: ratelimiter.Policies{"api": ratelimiter.PerSecond(1)},
			Env:      map[string]string{"APP_RATE_LIMIT_REDIS_ADDR": "127.0.0.1:2"}}, []string{"Options.Addr and Env[APP_RATE_LIMIT_REDIS_ADDR]"}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ratelimiter.New(ctx, tt.opts)
			require.ErrorIs(t, err, ratelimiter.ErrInvalidOptions)
			for _, w := range tt.want {
				assert.ErrorContains(t, err, w)
			}
			assert.NotContains(t, err.Error(), testSecret)
			assert.NotContains(t, err.Error(), "short-secret")
		})
	}
}

// TestMiddleware: the service's edge over the front door: routes of a
// Limit, the RateLimit fields, 429 with Retry-After.
func TestMiddleware(t *testing.T) {
	srv := redistest.Start(t)
	l := newLimiter(t, ratelimiter.Options{
		Addr: srv.Addr(), Secret: testSecret, KeyPrefix: prefix(t), DefaultPolicy: "api",
		Policies: ratelimiter.Policies{
			"api":    ratelimiter.PerSecond(100),
			"orders": ratelimiter.TokenBucket(2, 1, time.Hour).WithRoutes("POST /orders"),
		},
	})
	h := l.Middleware(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusCreated) }))
	var codes []int
	for range 3 {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/orders", nil))
		codes = append(codes, rec.Code)
		assert.NotEmpty(t, rec.Header().Get("RateLimit-Policy"))
		if rec.Code == http.StatusTooManyRequests {
			assert.NotEmpty(t, rec.Header().Get("Retry-After"))
		}
	}
	assert.Equal(t, []int{201, 201, 429}, codes)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/other", nil))
	assert.Equal(t, http.StatusCreated, rec.Code, "the default policy")
}

// TestFromEnv: the service's variables, validation and errors.
func TestFromEnv(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	t.Setenv("APP_RATE_LIMIT_REDIS_ADDR", srv.Addr())
	t.Setenv("APP_RATE_LIMIT_POLICIES_FILE", "../examples/policies.json")
	t.Setenv("APP_RATE_LIMIT_DEFAULT_POLICY", "api")
	t.Setenv("APP_RATE_LIMIT_KEY_PREFIX", prefix(t))
	t.Setenv("APP_WEB_SUBJECT_SECRET", testSecret)
	_, err := ratelimiter.FromEnv()
	var ve *config.VarError
	require.ErrorAs(t, err, &ve)
	assert.Equal(t, "APP_RATE_LIMIT_KEY_SECRET", ve.Var)

	t.Setenv("APP_RATE_LIMIT_KEY_SECRET", testSecret)
	l, err := ratelimiter.FromEnv()
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	d, err := l.Allow(ctx, "login", "user-1")
	require.NoError(t, err)
	assert.Equal(t, "allowed, 4 of 5 left", d.String())
	_, err = l.Allow(ctx, "nope", "user-1")
	var u *ratelimiter.UnavailableError
	require.ErrorAs(t, err, &u)
	assert.Equal(t, ratelimit.CategoryUnknownPolicy, u.Outcome.Category)

	t.Setenv("APP_RATE_LIMIT_ENABLED", "false")
	_, err = ratelimiter.FromEnv()
	assert.ErrorContains(t, err, "APP_RATE_LIMIT_ENABLED")
}

// TestDerivedSecrets: one Secret, two distinct derived secrets, stable;
// a service instance given them shares the front door's budgets.
func TestDerivedSecrets(t *testing.T) {
	k1, s1, err := ratelimiter.DeriveSecrets(testSecret)
	require.NoError(t, err)
	k2, s2, err := ratelimiter.DeriveSecrets(testSecret)
	require.NoError(t, err)
	assert.Equal(t, k1, k2)
	assert.Equal(t, s1, s2)
	assert.NotEqual(t, k1, s1)
	assert.Len(t, k1, 64)
	_, _, err = ratelimiter.DeriveSecrets("too-short")
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "too-short")

	srv := redistest.Start(t)
	p := prefix(t)
	pol := ratelimiter.Policies{"api": ratelimiter.TokenBucket(1, 1, time.Hour)}
	one := newLimiter(t, ratelimiter.Options{Addr: srv.Addr(), Secret: testSecret, KeyPrefix: p, Policies: pol})
	two := newLimiter(t, ratelimiter.Options{Addr: srv.Addr(), KeySecret: k1, SubjectSecret: s1, KeyPrefix: p, Policies: pol})
	d, err := one.Allow(context.Background(), "api", "s")
	require.NoError(t, err)
	require.True(t, d.Allowed)
	d, err = two.Allow(context.Background(), "api", "s")
	require.NoError(t, err)
	assert.False(t, d.Allowed, "the same budget")
}

// TestHelpers: the helpers mean what redis_rate means, and every other
// field is the example policy file's.
func TestHelpers(t *testing.T) {
	spec := ratelimiter.PerSecond(10).Spec("api")
	assert.Equal(t, ratelimit.GCRA{Rate: 10, Period: time.Second, Burst: 10}, spec.Params)
	assert.Equal(t, ratelimit.GCRA{Rate: 5, Period: time.Minute, Burst: 20}, ratelimiter.GCRA(5, time.Minute, 20).Spec("x").Params)
	assert.Equal(t, ratelimit.FailClosed, spec.FailurePolicy)

	set, err := config.ParsePolicies(strings.NewReader(config.DefaultPoliciesJSON()))
	require.NoError(t, err)
	api, ok := set.Policy("api")
	require.True(t, ok)
	assert.Equal(t, api.CleanupGrace(), spec.CleanupGrace)
	assert.Equal(t, api.MaxClockRegression(), spec.MaxClockRegression)
	assert.Equal(t, api.FailurePolicy(), spec.FailurePolicy)
}

// TestREADMEShowsExample: the README's first code block is Example's body
// (Addr "localhost:6379" for the private server), at most ten lines.
func TestREADMEShowsExample(t *testing.T) {
	src, err := os.ReadFile("example_test.go")
	require.NoError(t, err)
	body := between(t, string(src), "\tctx := context.Background()\n", "\t// Output:")
	lines := strings.Split(strings.TrimRight(body, "\n"), "\n")
	assert.LessOrEqual(t, len(lines), 10, "the first decision in ten lines")

	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	block := between(t, string(readme), "```go\n", "```")
	main := strings.Split(between(t, block, "func main() {\n", "\n}")[len("func main() {\n"):], "\n")
	require.Len(t, main, len(lines), "README's main is Example's body, line for line")
	for i, line := range lines {
		line = strings.ReplaceAll(line, "Addr: addr,", `Addr: "localhost:6379",`)
		assert.True(t, strings.HasPrefix(main[i], line), "README line %d: %q, Example: %q", i+1, main[i], line)
	}
}

func between(t *testing.T, s, from, to string) string {
	t.Helper()
	i := strings.Index(s, from)
	require.GreaterOrEqual(t, i, 0, "no %q", from)
	rest := s[i:]
	j := strings.Index(rest[len(from):], to)
	require.GreaterOrEqual(t, j, 0, "no %q after %q", to, from)
	return rest[:len(from)+j]
}
