package archrules

// ProjectPrefix is the module path prefix shared by every module of the
// project; a module lives in the workspace directory named by the rest of its
// path.
const ProjectPrefix = "github.com/tech-log/tech-log-backend/"

// Module directory names (and last module path elements) of the project.
const (
	SharedContract = "shared-contract"
	RedisAdapter   = "adapter-outbound-cache-redis"
	WebAdapter     = "adapter-inbound-web"
	GrpcAdapter    = "adapter-inbound-grpc"
	AppBootstrap   = "app-bootstrap"
	Tools          = "tools"
)

// Third-party import-path patterns used by the table.
const (
	testify   = "github.com/stretchr/testify/..."
	goleak    = "go.uber.org/goleak/..."
	rapid     = "pgregory.net/rapid/..."
	miniredis = "github.com/alicebob/miniredis/v2/..."
	toxiproxy = "github.com/Shopify/toxiproxy/..."
	// zerolog is part of toxiproxy's API (NewServer takes a logger).
	zerolog        = "github.com/rs/zerolog"
	testcontainers = "github.com/testcontainers/..."
	dockerAPI      = "github.com/moby/moby/..."
	goRedis        = "github.com/redis/go-redis/v9/..."
	// gobreaker is the rate-limit provider's circuit breaker.
	gobreaker  = "github.com/sony/gobreaker/v2/..."
	xtime      = "golang.org/x/time/..."
	fx         = "go.uber.org/fx/..."
	env        = "github.com/caarlos0/env/v11/..."
	prometheus = "github.com/prometheus/client_golang/..."
	// The Envoy rate-limit protocol: gRPC, protobuf, the Envoy API types,
	// the configuration file's YAML and its watcher.
	grpc     = "google.golang.org/grpc/..."
	protobuf = "google.golang.org/protobuf/..."
	envoyAPI = "github.com/envoyproxy/go-control-plane/envoy/..."
	fsnotify = "github.com/fsnotify/fsnotify"
	yamlV3   = "go.yaml.in/yaml/v3"
	// yamlV2 is the YAML library envoyproxy/ratelimit reads its files
	// with: rlsconfig uses it for the same semantics.
	yamlV2 = "gopkg.in/yaml.v2"
)

// Project returns the module rule table (docs/contract.md section 1). It is the one place
// the boundaries are written down; docs/architecture.md describes it.
//
// Reading it: a module's Code set is what its non-test files may import, Test
// is what its _test.go files may import in addition, Packages widen both for
// single packages. Edges are checked first and name the broken boundary; an
// import that passes every edge but is in no allowed set breaks the module's
// own rule (named after the module).
func Project() Table {
	return Table{
		Modules: []ModuleRule{
			{
				Module:         SharedContract,
				Code:           Set{Std: true, Modules: []string{SharedContract}},
				Test:           Set{Paths: []string{testify}},
				DirectRequires: []string{"github.com/stretchr/testify"},
			},
			{
				Module: RedisAdapter,
				Code:   Set{Std: true, Modules: []string{SharedContract, RedisAdapter}, Paths: []string{goRedis, gobreaker}},
				Test:   Set{Paths: []string{testify, goleak, rapid, miniredis, toxiproxy, zerolog}},
				Packages: []PackageRule{{
					// redistest is a test helper (like net/http/httptest): its
					// non-test code may start containers and fail tests. The
					// Docker API types are part of testcontainers' own API
					// (host config modifiers, container stop/pause).
					Package: "redistest/...",
					Code:    Set{Paths: []string{testcontainers, dockerAPI, testify, goleak}},
				}},
			},
			{
				Module: WebAdapter,
				Code:   Set{Std: true, Modules: []string{SharedContract, WebAdapter}, Paths: []string{xtime}},
				Test:   Set{Paths: []string{testify, goleak, rapid}},
			},
			{
				Module: GrpcAdapter,
				Code:   Set{Std: true, Modules: []string{SharedContract, GrpcAdapter}, Paths: []string{grpc, protobuf, envoyAPI, fsnotify, yamlV3, yamlV2}},
				Test:   Set{Paths: []string{testify, goleak, rapid}},
			},
			{
				Module: AppBootstrap,
				Code: Set{
					Std:     true,
					Modules: []string{SharedContract, RedisAdapter, WebAdapter, GrpcAdapter, AppBootstrap},
					Paths:   []string{fx, env, prometheus, goRedis, xtime, grpc, protobuf, envoyAPI},
				},
				Test: Set{Paths: []string{testify, goleak, rapid, miniredis}},
			},
			{
				Module: Tools,
				Code:   Set{Any: true},
			},
		},
		Edges: []EdgeRule{
			{
				Name:   "no-import-app-bootstrap",
				Why:    "app-bootstrap is the composition root; no other module may depend on it",
				To:     Set{Modules: []string{AppBootstrap}},
				Except: []Site{{Module: AppBootstrap}},
			},
			{
				Name:   "no-import-tools",
				Why:    "tools is development tooling; no other module may depend on it",
				To:     Set{Modules: []string{Tools}},
				Except: []Site{{Module: Tools}},
			},
			{
				Name: "adapters-isolated",
				Why:  "adapters never import each other; they meet only through shared-contract ports, wired in app-bootstrap",
				From: []string{WebAdapter},
				To:   Set{Modules: []string{RedisAdapter}},
			},
			{
				Name: "adapters-isolated",
				Why:  "adapters never import each other; they meet only through shared-contract ports, wired in app-bootstrap",
				From: []string{RedisAdapter},
				To:   Set{Modules: []string{WebAdapter}},
			},
			{
				Name: "adapters-isolated",
				Why:  "adapters never import each other; they meet only through shared-contract ports, wired in app-bootstrap",
				From: []string{GrpcAdapter},
				To:   Set{Modules: []string{RedisAdapter, WebAdapter}},
			},
			{
				Name:   "grpc-adapter-only-in-app-bootstrap",
				Why:    "the Envoy rate-limit service is wired only by the composition root",
				To:     Set{Modules: []string{GrpcAdapter}},
				Except: []Site{{Module: GrpcAdapter}, {Module: AppBootstrap}},
			},
			{
				Name:   "fx-only-in-app-bootstrap",
				Why:    "dependency injection is wiring; only app-bootstrap imports go.uber.org/fx",
				To:     Set{Paths: []string{fx}},
				Except: []Site{{Module: AppBootstrap}},
			},
			{
				Name:   "go-redis-only-in-redis-adapter-and-bootstrap",
				Why:    "the Redis client belongs to adapter-outbound-cache-redis (and app-bootstrap, which constructs it)",
				To:     Set{Paths: []string{goRedis}},
				Except: []Site{{Module: RedisAdapter}, {Module: AppBootstrap}, {Module: Tools}},
			},
			{
				Name:   "testcontainers-only-in-redistest",
				Why:    "containers (testcontainers, the Docker API) are driven only by the redistest helper package",
				To:     Set{Paths: []string{testcontainers, dockerAPI}},
				Except: []Site{{Module: RedisAdapter, Package: "redistest/..."}, {Module: Tools}},
			},
			{
				Name: "config-imports-no-adapter",
				Why:  "the configuration checks values by the contract's rules (shared-contract: the route grammar, the set-member rule, the bounds), never by an adapter's; the wiring hands values to adapters (ADR 0033, ADR 0036)",
				From: []string{AppBootstrap},
				Only: []Site{{Module: AppBootstrap, Package: "config/..."}},
				To:   Set{Modules: []string{WebAdapter, RedisAdapter, GrpcAdapter}},
			},
			{
				Name:   "prometheus-only-in-app-bootstrap",
				Why:    "metrics are wired in app-bootstrap; adapters and the contract stay metrics-library free",
				To:     Set{Paths: []string{prometheus}},
				Except: []Site{{Module: AppBootstrap}, {Module: Tools}},
			},
		},
	}
}
