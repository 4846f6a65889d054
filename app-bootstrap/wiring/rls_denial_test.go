package wiring

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/tech-log/tech-log-backend/adapter-inbound-grpc/rls"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/ratedenial"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redisrate"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
	"github.com/tech-log/tech-log-backend/app-bootstrap/metrics"
	"github.com/tech-log/tech-log-backend/shared-contract/keyspace"
)

// rlsDenialRules: user under the policy file's login (5 a minute) and
// remote_address at 3 an hour.
const rlsDenialRules = `domain: web
descriptors:
  - key: user
    rate_limit: {policy: login}
  - key: remote_address
    rate_limit: {unit: hour, requests_per_unit: 3}
`

// scriptCalls is how many programs the server has run (INFO
// commandstats: EVALSHA, EVAL and their read-only forms).
func scriptCalls(t *testing.T, rs *redistest.Server) int64 {
	t.Helper()
	var n int64
	for name, st := range redistest.CommandStats(t, rs.Client()) {
		if strings.HasPrefix(name, "eval") || strings.HasPrefix(name, "fcall") {
			n += st.Calls
		}
	}
	return n
}

// rlsAsk sends one request of descriptors (key=value pairs, one entry
// each); a descriptor's hits_addend is 0 when its key ends in "?"
// (the "?" dropped): a check only.
func rlsAsk(t *testing.T, c pb.RateLimitServiceClient, kv ...string) *pb.RateLimitResponse {
	t.Helper()
	req := &pb.RateLimitRequest{Domain: "web"}
	for i := 0; i+1 < len(kv); i += 2 {
		d := &rlcommon.RateLimitDescriptor{Entries: []*rlcommon.RateLimitDescriptor_Entry{{Key: strings.TrimSuffix(kv[i], "?"), Value: kv[i+1]}}}
		if strings.HasSuffix(kv[i], "?") {
			d.HitsAddend = wrapperspb.UInt64(0)
		}
		req.Descriptors = append(req.Descriptors, d)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := c.ShouldRateLimit(ctx, req)
	require.NoError(t, err)
	return resp
}

// cachedDenial asks for key=value, denied, until a denial is answered
// without a program run on the server: the denial cache is live (its
// subscription confirmed) and holds the subject's denial.
func cachedDenial(t *testing.T, rs *redistest.Server, c pb.RateLimitServiceClient, key, value string) {
	t.Helper()
	cachedAnswer(t, rs, c, pb.RateLimitResponse_OVER_LIMIT, key, value)
}

// cachedAnswer asks for key=value, answered want, until an answer comes
// without a program run on the server. Bounded: 100 attempts, 20 ms
// apart.
func cachedAnswer(t *testing.T, rs *redistest.Server, c pb.RateLimitServiceClient, want pb.RateLimitResponse_Code, key, value string) {
	t.Helper()
	for range 100 {
		before := scriptCalls(t, rs)
		resp := rlsAsk(t, c, key, value)
		require.Equal(t, want, resp.GetOverallCode())
		if scriptCalls(t, rs) == before {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s: no answer from the denial cache in 100 attempts", key)
}

// TestRLSDenialCache: each rule generation's decision port has the HTTP
// edge's denial cache (APP_RATE_LIMIT_DENIAL_CACHE_MAX_ENTRIES, on by
// default). A flood of a denied descriptor is answered without a Redis
// round trip, OVER_LIMIT with a duration_until_reset within the window;
// a denial answered from the cache still gives back what an earlier
// descriptor of the request charged, and a check (hits_addend 0) of a
// denied subject is OVER_LIMIT and consumes nothing; a reset (DEL and the
// invalidation on ratedenial.Channel, as tlbctl reset does) drops it; a
// reload to a higher limit starts a fresh cache, so the cached denial is
// not served; stop leaves no goroutine (each generation's subscription
// stops with it).
func TestRLSDenialCache(t *testing.T) {
	rs := redistest.Start(t)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "web.yaml"), []byte(rlsDenialRules), 0o600))
	cfg := loadConfig(t, rlsKV(rs.Addr(), dir)...)
	require.Positive(t, cfg.RateLimit.DenialCacheMaxEntries, "on by default")
	var srv *RLSServer
	var m *metrics.Metrics
	app := fxtest.New(t, Options(cfg, quietLogger()), fx.Populate(&srv, &m))
	app.RequireStart()
	defer app.RequireStop()
	c, closeConn := rlsConn(t, srv.Addr())
	defer closeConn()

	// The flood: 3 admitted, then denials from the cache.
	for i := range 3 {
		require.Equal(t, pb.RateLimitResponse_OK, rlsAsk(t, c, "remote_address", "192.0.2.1").GetOverallCode(), "request %d", i+1)
	}
	cachedDenial(t, rs, c, "remote_address", "192.0.2.1")
	before := scriptCalls(t, rs)
	for i := range 20 {
		resp := rlsAsk(t, c, "remote_address", "192.0.2.1")
		require.Equal(t, pb.RateLimitResponse_OVER_LIMIT, resp.GetOverallCode(), "flood %d", i)
		st := resp.GetStatuses()[0]
		assert.Equal(t, uint32(3), st.GetCurrentLimit().GetRequestsPerUnit())
		assert.Zero(t, st.GetLimitRemaining())
		wait := st.GetDurationUntilReset().AsDuration()
		assert.True(t, wait > 0 && wait <= time.Hour, "flood %d: duration_until_reset %v within the hour window", i, wait)
	}
	assert.Equal(t, before, scriptCalls(t, rs), "20 denials without a program run")
	hits := gathered(t, m, metrics.RLSDenialCacheHitsTotal)
	assert.GreaterOrEqual(t, hits, 21.0, "the flood's denials counted as the RLS cache's hits")
	assert.Equal(t, 1.0, gathered(t, m, metrics.RLSDenialCacheLive))
	assert.Positive(t, gathered(t, m, metrics.RLSDenialCacheEntries))
	assert.Zero(t, gathered(t, m, metrics.DenialCacheHitsTotal), "the edge's cache is another one")

	// All or nothing: 192.0.2.2 is charged first, then the cached denial
	// refuses the request, and the charge is given back.
	require.Equal(t, pb.RateLimitResponse_OVER_LIMIT,
		rlsAsk(t, c, "remote_address", "192.0.2.2", "user", "nobody", "remote_address", "192.0.2.1").GetOverallCode())
	// A check of the denied subject: OVER_LIMIT, nothing consumed.
	require.Equal(t, pb.RateLimitResponse_OVER_LIMIT, rlsAsk(t, c, "remote_address?", "192.0.2.1").GetOverallCode())
	for i := range 3 {
		require.Equal(t, pb.RateLimitResponse_OK, rlsAsk(t, c, "remote_address", "192.0.2.2").GetOverallCode(), "refunded: request %d of 3", i+1)
	}
	require.Equal(t, pb.RateLimitResponse_OVER_LIMIT, rlsAsk(t, c, "remote_address", "192.0.2.2").GetOverallCode())

	// A reset of user=alice (login, the edge's state) invalidates the
	// cached denial, as it does the edge's.
	for range 5 {
		require.Equal(t, pb.RateLimitResponse_OK, rlsAsk(t, c, "user", "alice").GetOverallCode())
	}
	cachedDenial(t, rs, c, "user", "alice")
	login, ok := cfg.RateLimit.Policies.Policy("login")
	require.True(t, ok)
	keys, err := keyspace.NewBuilder(cfg.RateLimit.KeyPrefix, cfg.RateLimit.KeySecret)
	require.NoError(t, err)
	pseud, err := rlsPseudonymizer(cfg.Web.SubjectSecret)
	require.NoError(t, err)
	digest, err := pseud.Pseudonymize("alice")
	require.NoError(t, err)
	stateKey, err := redisrate.StateKey(keys, login, digest)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.Equal(t, int64(1), rs.Client().Del(ctx, stateKey).Val(), "the state was there")
	n, err := ratedenial.Publish(ctx, rs.Client(), stateKey)
	require.NoError(t, err)
	require.Positive(t, n, "the generation's cache is subscribed")
	// The message reaches the subscription asynchronously: bounded wait.
	reset := false
	for range 100 {
		if rlsAsk(t, c, "user?", "alice").GetOverallCode() == pb.RateLimitResponse_OK {
			reset = true
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	require.True(t, reset, "the reset's invalidation dropped the cached denial")
	require.Equal(t, pb.RateLimitResponse_OK, rlsAsk(t, c, "user", "alice").GetOverallCode(), "a fresh budget after the reset")

	// A reload to 5 an hour: a new generation, a fresh cache; 192.0.2.1
	// spent 3 and gets 2 more (or a new window's 5), never the old
	// generation's cached denial.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "web.yaml"),
		[]byte(strings.Replace(rlsDenialRules, "requests_per_unit: 3", "requests_per_unit: 5", 1)), 0o600))
	require.NoError(t, srv.Reload())
	resp := rlsAsk(t, c, "remote_address", "192.0.2.1")
	require.Equal(t, pb.RateLimitResponse_OK, resp.GetOverallCode(), "the raised limit, not the cached denial")
	assert.Equal(t, uint32(5), resp.GetStatuses()[0].GetCurrentLimit().GetRequestsPerUnit())
	assert.GreaterOrEqual(t, gathered(t, m, metrics.RLSDenialCacheHitsTotal), hits, "a reload never lowers a counter")
	assert.Equal(t, 1.0, gathered(t, m, metrics.RLSDenialCacheLive), "the new generation's cache serves")
}

// gathered is the value of the unlabelled metric name in m's registry.
func gathered(t *testing.T, m *metrics.Metrics, name string) float64 {
	t.Helper()
	families, err := m.Registry().Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		require.Len(t, f.GetMetric(), 1, name)
		if c := f.GetMetric()[0].GetCounter(); c != nil {
			return c.GetValue()
		}
		return f.GetMetric()[0].GetGauge().GetValue()
	}
	t.Fatalf("%s is not registered", name)
	return 0
}

// TestRLSLocalFallback: a rule naming a local-fallback policy of the
// policy file is decided locally while Redis is unreachable, as the edge
// decides it (the policy's share of 4 over 2 instances: 2), instead of
// failing closed; stop leaves no goroutine (the generation's fallback and
// the denial cache's retrying subscription stop with it).
func TestRLSLocalFallback(t *testing.T) {
	down := newQuietListener(t)
	addr := down.Addr()
	require.NoError(t, down.ln.Close())
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	file := filepath.Join(t.TempDir(), "policies.json")
	require.NoError(t, os.WriteFile(file, []byte(`{"policies":[{"id":"api","revision":1,"algorithm":"fixed_window","limit":4,"window":"1h",
		"maxCost":1,"cleanupGrace":"1m","maxClockRegression":"2s","failurePolicy":"local-fallback","fallbackInstances":2,"routes":["GET /api/"]}]}`), 0o600))
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "web.yaml"), []byte("domain: web\ndescriptors:\n  - key: user\n    rate_limit: {policy: api}\n"), 0o600))
	cfg := loadConfig(t, rlsKV(addr, dir,
		"APP_RATE_LIMIT_POLICIES_FILE", file,
		"APP_RATE_LIMIT_BREAKER_THRESHOLD", "1",
		"APP_RATE_LIMIT_BREAKER_PROBE_INTERVAL", "1m")...)
	var srv *RLSServer
	app := fxtest.New(t, Options(cfg, quietLogger()), fx.Populate(&srv))
	app.RequireStart()
	defer app.RequireStop()
	c, closeConn := rlsConn(t, srv.Addr())
	defer closeConn()

	var codes []pb.RateLimitResponse_Code
	for range 4 {
		resp := rlsAsk(t, c, "user", "alice")
		for _, h := range resp.GetResponseHeadersToAdd() {
			assert.NotEqual(t, strings.ToLower(rls.UndecidedHeader), strings.ToLower(h.GetKey()), "decided locally, not undecided")
		}
		codes = append(codes, resp.GetOverallCode())
	}
	assert.Equal(t, []pb.RateLimitResponse_Code{pb.RateLimitResponse_OK, pb.RateLimitResponse_OK, pb.RateLimitResponse_OVER_LIMIT, pb.RateLimitResponse_OVER_LIMIT}, codes)
}

// TestRLSDenialCacheShadowMode: a shadow_mode rule's would-be denial,
// answered from the cache, is still OK and consumes nothing: after a
// reload to an enforced limit of 2, the subject that spent 1 and was
// flooded in shadow gets exactly one more.
func TestRLSDenialCacheShadowMode(t *testing.T) {
	rs := redistest.Start(t)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	dir := t.TempDir()
	rule := "domain: web\ndescriptors:\n  - key: remote_address\n    rate_limit: {unit: hour, requests_per_unit: %d}\n    shadow_mode: %t\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "web.yaml"), []byte(fmt.Sprintf(rule, 1, true)), 0o600))
	cfg := loadConfig(t, rlsKV(rs.Addr(), dir)...)
	var srv *RLSServer
	app := fxtest.New(t, Options(cfg, quietLogger()), fx.Populate(&srv))
	app.RequireStart()
	defer app.RequireStop()
	c, closeConn := rlsConn(t, srv.Addr())
	defer closeConn()

	require.Equal(t, pb.RateLimitResponse_OK, rlsAsk(t, c, "remote_address", "192.0.2.1").GetOverallCode())
	cachedAnswer(t, rs, c, pb.RateLimitResponse_OK, "remote_address", "192.0.2.1")
	for i := range 10 {
		require.Equal(t, pb.RateLimitResponse_OK, rlsAsk(t, c, "remote_address", "192.0.2.1").GetOverallCode(), "shadow %d", i)
	}

	require.NoError(t, os.WriteFile(filepath.Join(dir, "web.yaml"), []byte(fmt.Sprintf(rule, 2, false)), 0o600))
	require.NoError(t, srv.Reload())
	got := []pb.RateLimitResponse_Code{
		rlsAsk(t, c, "remote_address", "192.0.2.1").GetOverallCode(),
		rlsAsk(t, c, "remote_address", "192.0.2.1").GetOverallCode(),
	}
	// An hour window: a run that crossed the hour starts a fresh one.
	if got[1] != pb.RateLimitResponse_OK {
		assert.Equal(t, []pb.RateLimitResponse_Code{pb.RateLimitResponse_OK, pb.RateLimitResponse_OVER_LIMIT}, got,
			"the shadow denials consumed nothing: 1 spent, 1 left of 2")
	}
}
