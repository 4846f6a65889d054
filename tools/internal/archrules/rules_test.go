package archrules

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var testStd = map[string]bool{"fmt": true, "net/http": true, "context": true, "testing": true, "errors": true}

func checker() Checker {
	return Checker{Table: Project(), IsStd: func(p string) bool { return testStd[p] }}
}

const (
	pSC    = ProjectPrefix + SharedContract + "/ratelimit"
	pRedis = ProjectPrefix + RedisAdapter + "/redisrate"
	pRT    = ProjectPrefix + RedisAdapter + "/redistest"
	pWeb   = ProjectPrefix + WebAdapter + "/edge"
	pBoot  = ProjectPrefix + AppBootstrap + "/config"
	pRLS   = ProjectPrefix + GrpcAdapter + "/rls"
	pTools = ProjectPrefix + Tools + "/internal/archrules"

	fxPkg    = "go.uber.org/fx"
	redisPkg = "github.com/redis/go-redis/v9"
	tcPkg    = "github.com/testcontainers/testcontainers-go"
	promPkg  = "github.com/prometheus/client_golang/prometheus"
	requireP = "github.com/stretchr/testify/require"
	leftpad  = "github.com/acme/leftpad"
)

type importCase struct {
	name   string
	module string
	pkg    string
	imp    string
	test   bool
	want   string // "" means allowed
}

var importCases = []importCase{
	// shared-contract
	{"sc stdlib", SharedContract, "ratelimit", "fmt", false, ""},
	{"sc own package", SharedContract, "keyspace", pSC, false, ""},
	{"sc testify in tests", SharedContract, "ratelimit", requireP, true, ""},
	{"sc testify in code", SharedContract, "ratelimit", requireP, false, SharedContract},
	{"sc third party", SharedContract, "ratelimit", leftpad, false, SharedContract},
	{"sc third party in tests", SharedContract, "ratelimit", leftpad, true, SharedContract},
	{"sc goleak in tests", SharedContract, "ratelimit", "go.uber.org/goleak", true, SharedContract},
	{"sc imports adapter", SharedContract, "ratelimit", pRedis, false, SharedContract},
	{"sc imports bootstrap", SharedContract, "ratelimit", pBoot, false, "no-import-app-bootstrap"},
	{"sc imports go-redis", SharedContract, "cache", redisPkg, false, "go-redis-only-in-redis-adapter-and-bootstrap"},
	{"sc unknown project module", SharedContract, "cache", ProjectPrefix + "other/x", false, SharedContract},
	{"sc look-alike module path", SharedContract, "cache", ProjectPrefix + "shared-contractx/y", false, SharedContract},

	// adapter-outbound-cache-redis
	{"redis go-redis", RedisAdapter, "redisrate", redisPkg, false, ""},
	{"redis go-redis subpackage", RedisAdapter, "redisrate", redisPkg + "/internal/proto", false, ""},
	{"redis shared-contract", RedisAdapter, "redisrate", pSC, false, ""},
	{"redis own redistest in tests", RedisAdapter, "redisrate", pRT, true, ""},
	{"redis miniredis in tests", RedisAdapter, "programs", "github.com/alicebob/miniredis/v2", true, ""},
	{"redis miniredis in code", RedisAdapter, "programs", "github.com/alicebob/miniredis/v2", false, RedisAdapter},
	{"redis toxiproxy in tests", RedisAdapter, "redisrate", "github.com/Shopify/toxiproxy/v2/client", true, ""},
	{"redis rapid in tests", RedisAdapter, "model", "pgregory.net/rapid", true, ""},
	{"redis testify in code", RedisAdapter, "redisrate", requireP, false, RedisAdapter},
	{"redis go-redis v8", RedisAdapter, "redisrate", "github.com/go-redis/redis/v8", false, RedisAdapter},
	{"redistest testcontainers", RedisAdapter, "redistest", tcPkg, false, ""},
	{"redistest testcontainers redis module", RedisAdapter, "redistest", tcPkg + "/modules/redis", false, ""},
	{"redistest docker api", RedisAdapter, "redistest", "github.com/moby/moby/client", false, ""},
	{"redistest testify in code", RedisAdapter, "redistest", requireP, false, ""},
	{"redistest goleak in code", RedisAdapter, "redistest", "go.uber.org/goleak", false, ""},
	{"redistest testcontainers in its tests", RedisAdapter, "redistest", tcPkg, true, ""},
	{"redistest miniredis in code", RedisAdapter, "redistest", "github.com/alicebob/miniredis/v2", false, RedisAdapter},
	{"testcontainers outside redistest", RedisAdapter, "redisrate", tcPkg, true, "testcontainers-only-in-redistest"},
	{"docker api outside redistest", RedisAdapter, "redisrate", "github.com/moby/moby/client", false, "testcontainers-only-in-redistest"},
	{"redistest-like name is not redistest", RedisAdapter, "redistestx", tcPkg, false, "testcontainers-only-in-redistest"},
	{"redis imports web", RedisAdapter, "redisrate", pWeb, false, "adapters-isolated"},
	{"redis imports web in tests", RedisAdapter, "redisrate", pWeb, true, "adapters-isolated"},
	{"redis fx", RedisAdapter, "redisrate", fxPkg, false, "fx-only-in-app-bootstrap"},
	{"redis fx in tests", RedisAdapter, "redisrate", fxPkg + "/fxtest", true, "fx-only-in-app-bootstrap"},
	{"redis prometheus", RedisAdapter, "redisrate", promPkg, false, "prometheus-only-in-app-bootstrap"},
	{"redis imports tools", RedisAdapter, "redisrate", pTools, true, "no-import-tools"},

	// adapter-inbound-web
	{"web stdlib", WebAdapter, "edge", "net/http", false, ""},
	{"web x/time", WebAdapter, "local", "golang.org/x/time/rate", false, ""},
	{"web shared-contract", WebAdapter, "edge", pSC, false, ""},
	{"web goleak in tests", WebAdapter, "edge", "go.uber.org/goleak", true, ""},
	{"web rapid in tests", WebAdapter, "edge", "pgregory.net/rapid", true, ""},
	{"web rapid in code", WebAdapter, "edge", "pgregory.net/rapid", false, WebAdapter},
	{"web x/net", WebAdapter, "edge", "golang.org/x/net/http2", false, WebAdapter},
	{"web miniredis in tests", WebAdapter, "edge", "github.com/alicebob/miniredis/v2", true, WebAdapter},
	{"web go-redis", WebAdapter, "edge", redisPkg, false, "go-redis-only-in-redis-adapter-and-bootstrap"},
	{"web imports redis adapter", WebAdapter, "edge", pRedis, false, "adapters-isolated"},
	{"web imports redistest in tests", WebAdapter, "edge", pRT, true, "adapters-isolated"},
	{"web fx", WebAdapter, "edge", fxPkg, false, "fx-only-in-app-bootstrap"},
	{"web prometheus", WebAdapter, "edge", promPkg, false, "prometheus-only-in-app-bootstrap"},
	{"web imports bootstrap", WebAdapter, "edge", pBoot, false, "no-import-app-bootstrap"},

	// adapter-inbound-grpc
	{"grpc shared-contract", GrpcAdapter, "rls", pSC, false, ""},
	{"grpc grpc", GrpcAdapter, "rls", "google.golang.org/grpc/health", false, ""},
	{"grpc envoy api", GrpcAdapter, "rls", "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3", false, ""},
	{"grpc protobuf", GrpcAdapter, "rls", "google.golang.org/protobuf/encoding/protojson", false, ""},
	{"grpc yaml", GrpcAdapter, "rlsconfig", "go.yaml.in/yaml/v3", false, ""},
	{"grpc fsnotify", GrpcAdapter, "rlsreload", "github.com/fsnotify/fsnotify", false, ""},
	{"grpc imports redis adapter", GrpcAdapter, "rls", pRedis, false, "adapters-isolated"},
	{"grpc imports redistest in tests", GrpcAdapter, "rls", pRT, true, "adapters-isolated"},
	{"grpc imports web adapter", GrpcAdapter, "rls", pWeb, false, "adapters-isolated"},
	{"grpc go-redis", GrpcAdapter, "rls", redisPkg, false, "go-redis-only-in-redis-adapter-and-bootstrap"},
	{"grpc fx", GrpcAdapter, "rls", fxPkg, false, "fx-only-in-app-bootstrap"},
	{"grpc prometheus", GrpcAdapter, "rls", promPkg, false, "prometheus-only-in-app-bootstrap"},
	{"grpc imports bootstrap", GrpcAdapter, "rls", pBoot, false, "no-import-app-bootstrap"},
	{"grpc unknown third party", GrpcAdapter, "rls", leftpad, false, GrpcAdapter},
	{"web imports grpc adapter", WebAdapter, "edge", pRLS, false, "grpc-adapter-only-in-app-bootstrap"},
	{"redis imports grpc adapter", RedisAdapter, "redisrate", pRLS, false, "grpc-adapter-only-in-app-bootstrap"},

	// app-bootstrap
	{"boot grpc adapter", AppBootstrap, "wiring", pRLS, false, ""},
	{"boot fx", AppBootstrap, "cmd/tech-log-backend", fxPkg, false, ""},
	{"boot fxtest in tests", AppBootstrap, "wiring", fxPkg + "/fxtest", true, ""},
	{"boot env", AppBootstrap, "config", "github.com/caarlos0/env/v11", false, ""},
	{"config imports the edge", AppBootstrap, "config", pWeb, false, "config-imports-no-adapter"},
	{"config imports the denial cache", AppBootstrap, "config", ProjectPrefix + RedisAdapter + "/ratedenial", true, "config-imports-no-adapter"},
	{"config imports redisrate", AppBootstrap, "config", pRedis, false, "config-imports-no-adapter"},
	{"config imports redisrate in tests", AppBootstrap, "config", pRedis, true, "config-imports-no-adapter"},
	{"config imports localimit", AppBootstrap, "config", ProjectPrefix + WebAdapter + "/localimit", false, "config-imports-no-adapter"},
	{"config imports subject", AppBootstrap, "config", ProjectPrefix + WebAdapter + "/subject", false, "config-imports-no-adapter"},
	{"config imports the rls adapter", AppBootstrap, "config", ProjectPrefix + GrpcAdapter + "/rls", false, "config-imports-no-adapter"},
	{"wiring imports the edge", AppBootstrap, "wiring", pWeb, false, ""},
	{"config imports the contract", AppBootstrap, "config", ProjectPrefix + SharedContract + "/route", false, ""},
	{"boot prometheus", AppBootstrap, "metrics", promPkg + "/promhttp", false, ""},
	{"boot go-redis", AppBootstrap, "wiring", redisPkg, false, ""},
	{"boot both adapters", AppBootstrap, "wiring", pWeb, false, ""},
	{"boot redis adapter", AppBootstrap, "wiring", pRedis, false, ""},
	{"boot redistest in tests", AppBootstrap, "wiring", pRT, true, ""},
	{"boot own package", AppBootstrap, "cmd/tech-log-backend", pBoot, false, ""},
	{"boot miniredis in tests", AppBootstrap, "wiring", "github.com/alicebob/miniredis/v2", true, ""},
	{"boot testify in code", AppBootstrap, "wiring", requireP, false, AppBootstrap},
	{"boot env v6", AppBootstrap, "config", "github.com/caarlos0/env/v6", false, AppBootstrap},
	{"boot unknown third party", AppBootstrap, "config", leftpad, false, AppBootstrap},
	{"boot testcontainers", AppBootstrap, "wiring", tcPkg, true, "testcontainers-only-in-redistest"},
	{"boot imports tools", AppBootstrap, "wiring", pTools, false, "no-import-tools"},

	// tools
	{"tools anything", Tools, "bench", leftpad, false, ""},
	{"tools adapter", Tools, "bench", pRedis, false, ""},
	{"tools go-redis", Tools, "load", redisPkg, false, ""},
	{"tools testcontainers", Tools, "bench", tcPkg, true, ""},
	{"tools own package", Tools, "cmd/archcheck", pTools, false, ""},
	{"tools fx", Tools, "bench", fxPkg, false, "fx-only-in-app-bootstrap"},
	{"tools imports bootstrap", Tools, "load", pBoot, false, "no-import-app-bootstrap"},

	// a module the table does not know
	{"unknown module", "other", "x", "fmt", false, RuleKnownModules},
}

func TestCheckImport(t *testing.T) {
	c := checker()
	for _, tt := range importCases {
		t.Run(tt.name, func(t *testing.T) {
			v, bad := c.CheckImport(Package{Module: tt.module, Path: tt.pkg}, tt.imp, tt.test)
			if tt.want == "" {
				assert.False(t, bad, "unexpected violation %s", v)
				return
			}
			require.True(t, bad, "want rule %s", tt.want)
			assert.Equal(t, tt.want, v.Rule)
			assert.Equal(t, tt.module+"/"+tt.pkg+" imports "+tt.imp+": rule "+tt.want, v.String())
			assert.Equal(t, tt.test, v.Test)
			assert.NotEmpty(t, v.Why)
		})
	}
}

func TestCheckPackagesReportsOnceAndInOrder(t *testing.T) {
	pkgs := []Package{
		{Module: WebAdapter, Path: "edge", Imports: []string{"net/http", redisPkg}, TestImports: []string{redisPkg, leftpad}},
		{Module: SharedContract, Path: "", Imports: []string{leftpad}},
	}
	got := checker().CheckPackages(pkgs)
	var lines []string
	for _, v := range got {
		lines = append(lines, v.String())
	}
	assert.Equal(t, []string{
		"adapter-inbound-web/edge imports github.com/acme/leftpad: rule adapter-inbound-web",
		"adapter-inbound-web/edge imports github.com/redis/go-redis/v9: rule go-redis-only-in-redis-adapter-and-bootstrap",
		"shared-contract imports github.com/acme/leftpad: rule shared-contract",
	}, lines)
	assert.True(t, got[0].Test, "leftpad is imported by tests only")
	assert.False(t, got[1].Test, "go-redis is imported by non-test code too")
}

func goodMods() []GoMod {
	sib := func(dirs ...string) ([]Require, map[string]string) {
		var req []Require
		rep := map[string]string{}
		for _, d := range dirs {
			req = append(req, Require{Path: ProjectPrefix + d})
			rep[ProjectPrefix+d] = "../" + d
		}
		return req, rep
	}
	scReq := []Require{{Path: "github.com/stretchr/testify"}, {Path: "gopkg.in/yaml.v3", Indirect: true}}
	redisReq, redisRep := sib(SharedContract)
	redisReq = append(redisReq, Require{Path: "github.com/redis/go-redis/v9"})
	webReq, webRep := sib(SharedContract)
	bootReq, bootRep := sib(SharedContract, RedisAdapter, WebAdapter)
	toolsReq, toolsRep := sib(RedisAdapter, SharedContract)
	return []GoMod{
		{Dir: SharedContract, Path: ProjectPrefix + SharedContract, Requires: scReq},
		{Dir: RedisAdapter, Path: ProjectPrefix + RedisAdapter, Requires: redisReq, Replaces: redisRep},
		{Dir: WebAdapter, Path: ProjectPrefix + WebAdapter, Requires: webReq, Replaces: webRep},
		{Dir: AppBootstrap, Path: ProjectPrefix + AppBootstrap, Requires: bootReq, Replaces: bootRep},
		{Dir: Tools, Path: ProjectPrefix + Tools, Requires: toolsReq, Replaces: toolsRep},
	}
}

type goModCase struct {
	name   string
	mutate func(mods []GoMod) []GoMod
	want   []string
}

var goModCases = []goModCase{
	{"clean", func(m []GoMod) []GoMod { return m }, nil},
	{"replace with trailing slash is fine", func(m []GoMod) []GoMod {
		m[3].Replaces[ProjectPrefix+SharedContract] = "../shared-contract/"
		return m
	}, nil},
	{"missing sibling replace", func(m []GoMod) []GoMod {
		delete(m[3].Replaces, ProjectPrefix+SharedContract)
		return m
	}, []string{"app-bootstrap/go.mod requires " + ProjectPrefix + "shared-contract: rule sibling-replace"}},
	{"indirect sibling require needs a replace too", func(m []GoMod) []GoMod {
		m[2].Requires = append(m[2].Requires, Require{Path: ProjectPrefix + RedisAdapter, Indirect: true})
		return m
	}, []string{"adapter-inbound-web/go.mod requires " + ProjectPrefix + RedisAdapter + ": rule sibling-replace"}},
	{"sibling replace to the wrong directory", func(m []GoMod) []GoMod {
		m[1].Replaces[ProjectPrefix+SharedContract] = "../../elsewhere/shared-contract"
		return m
	}, []string{"adapter-outbound-cache-redis/go.mod requires " + ProjectPrefix + "shared-contract: rule sibling-replace"}},
	{"sibling replace to a module version", func(m []GoMod) []GoMod {
		m[1].Replaces[ProjectPrefix+SharedContract] = "github.com/fork/shared-contract"
		return m
	}, []string{"adapter-outbound-cache-redis/go.mod requires " + ProjectPrefix + "shared-contract: rule sibling-replace"}},
	{"require of a project module outside the workspace", func(m []GoMod) []GoMod {
		m[4].Requires = append(m[4].Requires, Require{Path: ProjectPrefix + "ghost"})
		return m
	}, []string{"tools/go.mod requires " + ProjectPrefix + "ghost: rule sibling-replace"}},
	{"shared-contract requires a third party", func(m []GoMod) []GoMod {
		m[0].Requires = append(m[0].Requires, Require{Path: "github.com/acme/leftpad"})
		return m
	}, []string{"shared-contract/go.mod requires github.com/acme/leftpad: rule shared-contract-go-mod"}},
	{"shared-contract requires a sibling", func(m []GoMod) []GoMod {
		m[0].Requires = append(m[0].Requires, Require{Path: ProjectPrefix + WebAdapter})
		m[0].Replaces = map[string]string{ProjectPrefix + WebAdapter: "../" + WebAdapter}
		return m
	}, []string{"shared-contract/go.mod requires " + ProjectPrefix + WebAdapter + ": rule shared-contract-go-mod"}},
	{"wrong module path", func(m []GoMod) []GoMod {
		m[2].Path = "example.com/web"
		return m
	}, []string{
		"adapter-inbound-web/go.mod declares module example.com/web: rule module-path",
		// app-bootstrap's require no longer names a workspace module.
		"app-bootstrap/go.mod requires " + ProjectPrefix + WebAdapter + ": rule sibling-replace",
	}},
	{"unknown module", func(m []GoMod) []GoMod {
		return append(m, GoMod{Dir: "extra", Path: ProjectPrefix + "extra"})
	}, []string{"extra/go.mod declares module " + ProjectPrefix + "extra: rule known-modules"}},
}

func TestCheckGoMods(t *testing.T) {
	for _, tt := range goModCases {
		t.Run(tt.name, func(t *testing.T) {
			got := checker().CheckGoMods(tt.mutate(goodMods()))
			var lines []string
			for _, v := range got {
				lines = append(lines, v.String())
				assert.NotEmpty(t, v.Why)
			}
			assert.Equal(t, tt.want, lines)
		})
	}
}

func TestMatch(t *testing.T) {
	tests := []struct {
		pattern, path string
		want          bool
	}{
		{"go.uber.org/fx", "go.uber.org/fx", true},
		{"go.uber.org/fx", "go.uber.org/fx/fxtest", false},
		{"go.uber.org/fx/...", "go.uber.org/fx", true},
		{"go.uber.org/fx/...", "go.uber.org/fx/fxtest", true},
		{"go.uber.org/fx/...", "go.uber.org/fxx", false},
		{"go.uber.org/fx/...", "go.uber.org/f", false},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, Match(tt.pattern, tt.path), "Match(%q, %q)", tt.pattern, tt.path)
	}
}

func TestProjectTableIsValid(t *testing.T) {
	require.NoError(t, Project().Validate())
}

func TestValidateRejectsBrokenTables(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Table)
		want   string
	}{
		{"duplicate module", func(tb *Table) { tb.Modules = append(tb.Modules, ModuleRule{Module: Tools}) }, "duplicate"},
		{"unknown module in a set", func(tb *Table) { tb.Modules[0].Code.Modules = append(tb.Modules[0].Code.Modules, "ghost") }, `unknown module "ghost"`},
		{"malformed pattern", func(tb *Table) { tb.Modules[1].Test.Paths = append(tb.Modules[1].Test.Paths, "a/.../b") }, "malformed pattern"},
		{"edge without why", func(tb *Table) { tb.Edges[0].Why = "" }, "name and why are required"},
		{"edge forbidding everything", func(tb *Table) { tb.Edges[0].To.Any = true }, "must forbid specific"},
		{"edge exception for unknown module", func(tb *Table) { tb.Edges[0].Except = []Site{{Module: "ghost"}} }, `unknown module "ghost"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tb := Project()
			tt.mutate(&tb)
			err := tb.Validate()
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

// TestEveryRuleHasAViolatingCase keeps the case tables complete: a rule added
// to the table without a case that violates it fails here.
func TestEveryRuleHasAViolatingCase(t *testing.T) {
	covered := map[string]bool{}
	for _, c := range importCases {
		covered[c.want] = true
	}
	for _, c := range goModCases {
		for _, line := range c.want {
			_, rule, ok := strings.Cut(line, ": rule ")
			require.True(t, ok, line)
			covered[rule] = true
		}
	}
	tb := Project()
	names := []string{RuleKnownModules, RuleModulePath, RuleSiblingReplace}
	for _, m := range tb.Modules {
		if !m.Code.Any { // a module allowing anything has nothing to violate
			names = append(names, m.Module)
		}
		if m.DirectRequires != nil {
			names = append(names, m.Module+"-go-mod")
		}
	}
	for _, e := range tb.Edges {
		names = append(names, e.Name)
	}
	for _, n := range names {
		assert.True(t, covered[n], "no case violates rule %s", n)
	}
}
