package examples_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"go.uber.org/fx"

	"github.com/tech-log/tech-log-backend/adapter-inbound-web/edge"
	"github.com/tech-log/tech-log-backend/adapter-inbound-web/subject"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redisrate"
	"github.com/tech-log/tech-log-backend/app-bootstrap/config"
	"github.com/tech-log/tech-log-backend/app-bootstrap/wiring"
	"github.com/tech-log/tech-log-backend/shared-contract/keyspace"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// Example_netHTTP puts the Redis provider and the edge middleware in front of
// a plain net/http handler, without fx: one policy ("orders", a token bucket
// of 3 that refills one token an hour) limits POST /orders per client IP,
// and every instance that shares the Redis shares the limit.
func Example_netHTTP() {
	redisAddr, stopRedis := privateRedis() // your coordination Redis: host:port
	defer stopRedis()
	ctx := context.Background()

	// 1. The policy, checked by the contract (arithmetic bounds, fail-closed).
	orders, err := ratelimit.NewPolicy(ratelimit.PolicySpec{
		ID: "orders", Revision: 1, Algorithm: ratelimit.AlgorithmTokenBucket,
		Params:  ratelimit.TokenBucket{Capacity: 3, RefillTokens: 1, RefillPeriod: time.Hour},
		MaxCost: 1, CleanupGrace: time.Minute, MaxClockRegression: 2 * time.Second,
		FailurePolicy: ratelimit.FailClosed,
	})
	check(err)

	// 2. The Redis provider: its own client (never the cache's), an HMAC key
	// builder, the policies it may evaluate; Start checks the server version
	// and loads the programs.
	client, err := redisrate.NewClient(redisrate.ClientConfig{
		Addr: redisAddr, Protocol: redisrate.ProtocolRESP2,
		CommandTimeout: 250 * time.Millisecond, DialTimeout: 250 * time.Millisecond,
		PoolTimeout: 250 * time.Millisecond, PoolSize: 16,
	})
	check(err)
	keySecret, err := keyspace.NewSecret([]byte("example-key-secret-0123456789abcdef")) // >= 32 bytes, from your secret store
	check(err)
	keys, err := keyspace.NewBuilder("shop", keySecret)
	check(err)
	provider, err := redisrate.New(client, keys, []ratelimit.Policy{orders}, redisrate.Options{
		CommandTimeout: 250 * time.Millisecond, MaxInFlight: 16,
	})
	check(err)
	defer provider.Close()
	check(provider.Start(ctx))

	// 3. The edge middleware: who the client is (here its IP), how the
	// identity is pseudonymized before it reaches Redis, which route maps to
	// which policy.
	ips, err := subject.NewResolver(subject.Config{})
	check(err)
	subjectSecret, err := keyspace.NewSecret([]byte("example-subject-secret-0123456789ab"))
	check(err)
	pseudo, err := subject.NewPseudonymizer(subjectSecret)
	check(err)
	limiter, err := edge.New(edge.Config{
		Port: provider, Subjects: ips, Pseudonymizer: pseudo,
		DefaultPolicy: "orders",
		Routes:        []edge.Route{{Pattern: "POST /orders", Policy: "orders"}},
		Timeout:       500 * time.Millisecond, // > the command timeout
		Policies:      []ratelimit.Policy{orders},
	})
	check(err)

	// 4. Your handler behind it, in an ordinary http.Server.
	mux := http.NewServeMux()
	mux.HandleFunc("POST /orders", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "order accepted")
	})
	srv := &http.Server{Handler: limiter.Wrap(mux), ReadHeaderTimeout: 5 * time.Second}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	check(err)
	go func() { _ = srv.Serve(ln) }()
	defer func() { _ = srv.Shutdown(ctx) }()

	for i := 1; i <= 4; i++ {
		resp := post("http://" + ln.Addr().String() + "/orders")
		fmt.Println(i, resp.StatusCode, "remaining:", resp.Header.Get("RateLimit-Remaining"))
	}
	// Output:
	// 1 200 remaining: 2
	// 2 200 remaining: 1
	// 3 200 remaining: 0
	// 4 429 remaining: 0
}

// Example_fxModules does the same inside your own fx application: the
// configuration comes from APP_ variables (config.Load), wiring.MetricsModule
// and wiring.RateLimitModule provide the instrumented ratelimit.EdgePort
// with its lifecycle (version check and program warm-up on start, close on
// stop), and your own server wraps its handler with the edge middleware.
func Example_fxModules() {
	redisAddr, stopRedis := privateRedis()
	defer stopRedis()

	dir, err := os.MkdirTemp("", "tlb-example-")
	check(err)
	defer os.RemoveAll(dir)
	policies := filepath.Join(dir, "policies.json")
	check(os.WriteFile(policies, []byte(`{"policies": [
	  {"id": "orders", "revision": 1, "algorithm": "token_bucket",
	   "capacity": 3, "refillTokens": 1, "refillPeriod": "1h",
	   "maxCost": 1, "cleanupGrace": "1m", "maxClockRegression": "2s",
	   "failurePolicy": "fail-closed", "routes": ["POST /orders"]}]}`), 0o600))

	// Usually config.Load(config.FromEnviron(os.Environ())).
	cfg, err := config.Load(map[string]string{
		"APP_RATE_LIMIT_ENABLED":        "true",
		"APP_RATE_LIMIT_PROVIDER":       "redis",
		"APP_RATE_LIMIT_REDIS_ADDR":     redisAddr,
		"APP_RATE_LIMIT_KEY_SECRET":     "example-key-secret-0123456789abcdef",
		"APP_RATE_LIMIT_POLICIES_FILE":  policies,
		"APP_RATE_LIMIT_DEFAULT_POLICY": "orders",
		"APP_WEB_SUBJECT_SECRET":        "example-subject-secret-0123456789ab",
	})
	check(err)
	logger := slog.New(slog.DiscardHandler)

	var base string
	app := fx.New(
		fx.NopLogger,
		fx.Supply(cfg, logger),
		wiring.MetricsModule(),
		wiring.RateLimitModule(), // provides ratelimit.EdgePort
		fx.Invoke(func(lc fx.Lifecycle, port ratelimit.EdgePort) error {
			limiter, err := newLimiter(cfg, port)
			if err != nil {
				return err
			}
			mux := http.NewServeMux()
			mux.HandleFunc("POST /orders", func(w http.ResponseWriter, _ *http.Request) {
				fmt.Fprintln(w, "order accepted")
			})
			srv := &http.Server{Handler: limiter.Wrap(mux), ReadHeaderTimeout: 5 * time.Second}
			lc.Append(fx.Hook{
				OnStart: func(context.Context) error {
					ln, err := net.Listen("tcp", "127.0.0.1:0")
					if err != nil {
						return err
					}
					base = "http://" + ln.Addr().String()
					go func() { _ = srv.Serve(ln) }()
					return nil
				},
				OnStop: srv.Shutdown,
			})
			return nil
		}),
	)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	check(app.Start(ctx))
	defer func() { _ = app.Stop(ctx) }()

	for i := 1; i <= 4; i++ {
		resp := post(base + "/orders")
		fmt.Println(i, resp.StatusCode, "remaining:", resp.Header.Get("RateLimit-Remaining"))
	}
	// Output:
	// 1 200 remaining: 2
	// 2 200 remaining: 1
	// 3 200 remaining: 0
	// 4 429 remaining: 0
}

// newLimiter builds the edge middleware from the loaded configuration (the
// service's own wiring.NewHandler does the same, plus metrics).
func newLimiter(cfg config.Config, port ratelimit.EdgePort) (*edge.Middleware, error) {
	ips, err := subject.NewResolver(subject.Config{TrustedProxies: cfg.Web.TrustedProxies})
	if err != nil {
		return nil, err
	}
	pseudo, err := subject.NewPseudonymizer(cfg.Web.SubjectSecret)
	if err != nil {
		return nil, err
	}
	rl := cfg.RateLimit
	routes := make([]edge.Route, 0, len(rl.Policies.Routes))
	for _, r := range rl.Policies.Routes {
		routes = append(routes, edge.Route{Pattern: r.Pattern, Policy: r.Policy})
	}
	return edge.New(edge.Config{
		Port: port, Subjects: ips, Pseudonymizer: pseudo,
		DefaultPolicy: rl.DefaultPolicy, Routes: routes,
		Timeout: cfg.Web.EvaluationTimeout, Policies: rl.Policies.Policies,
	})
}

// post sends one bounded POST without keep-alive and closes the body.
func post(url string) *http.Response {
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Post(url, "text/plain", http.NoBody)
	check(err)
	resp.Body.Close()
	return resp
}

func check(err error) {
	if err != nil {
		panic(err)
	}
}
