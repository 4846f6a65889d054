package wiring

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"

	"github.com/tech-log/tech-log-backend/adapter-inbound-web/subject"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/rateplan"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
	"github.com/tech-log/tech-log-backend/app-bootstrap/config"
	"github.com/tech-log/tech-log-backend/shared-contract/keyspace"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// plansFile: api limits every API route, 3 an hour; on plan gold the
// routes of api are decided by api-gold, 10 an hour; free (the default)
// leaves api as it is.
const plansFile = `{"policies": [
  {"id": "api", "revision": 1, "algorithm": "fixed_window", "limit": 3, "window": "1h", "maxCost": 1, "cleanupGrace": "1m", "maxClockRegression": "2s", "failurePolicy": "fail-closed", "routes": ["GET /api/"]},
  {"id": "api-gold", "revision": 1, "algorithm": "fixed_window", "limit": 10, "window": "1h", "maxCost": 1, "cleanupGrace": "1m", "maxClockRegression": "2s", "failurePolicy": "fail-closed"}
 ],
 "plans": [{"id": "free", "policies": {"api": "api"}}, {"id": "gold", "policies": {"api": "api-gold"}}],
 "defaultPlan": "free"}`

// planInstance is one service instance of the plans test.
type planInstance struct {
	srv *Server
}

func (in planInstance) get(t *testing.T, header ...string) int {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, "http://"+in.srv.Addr()+PathPing, nil)
	require.NoError(t, err)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := httpClient().Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	return resp.StatusCode
}

// TestPlansTwoInstances (issue 36, done when): a subject on free hits its
// limit on two instances; plan gold, set by the operator's store, raises
// it on both within a second with no admission above the carry-over bound
// (max(free, gold) over the window: the three admitted on free count
// against gold); plan free lowers it at the next decision on both, before
// any cache could have heard it. No header a client sends chooses a plan.
func TestPlansTwoInstances(t *testing.T) {
	rs := redistest.Start(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "policies.json")
	require.NoError(t, os.WriteFile(path, []byte(plansFile), 0o600))
	cfg := loadConfig(t, append(enabledKV(rs.Addr()), "APP_RATE_LIMIT_POLICIES_FILE", path)...)
	require.False(t, cfg.RateLimit.Policies.Plans.IsZero())

	var a, b planInstance
	for _, in := range []*planInstance{&a, &b} {
		app := fxtest.New(t, Options(cfg, quietLogger()), fx.Populate(&in.srv))
		app.RequireStart()
		t.Cleanup(app.RequireStop)
	}
	store, digest := planStore(t, cfg, rs.Addr())
	ctx := context.Background()

	// Free: 3 in all, whatever the instance; a client's headers choose no plan.
	admitted := 0
	for i, in := range []planInstance{a, b, a, b, a} {
		if in.get(t, "X-Plan", "gold", "X-RateLimit-Plan", "gold", "X-Tier", "gold") == http.StatusOK {
			admitted++
		} else {
			assert.GreaterOrEqual(t, i, 3, "request %d denied before the free limit", i)
		}
	}
	require.Equal(t, 3, admitted, "free admits its limit across both instances")

	// Gold: both instances admit within a second.
	change, err := store.Set(ctx, digest, "gold")
	require.NoError(t, err)
	require.Len(t, change.Moves, 1)
	assert.Equal(t, int64(3), change.Moves[0].Consumed)
	assert.Equal(t, int64(3), change.Moves[0].Carried)
	setAt := time.Now()
	for _, in := range []planInstance{a, b} {
		for in.get(t) != http.StatusOK {
			require.Less(t, time.Since(setAt), time.Second, "an instance still denies a second after the raise")
			time.Sleep(10 * time.Millisecond)
		}
		admitted++
	}
	// Then up to gold's limit in all, counting the three taken on free.
	for i := 0; i < 20; i++ {
		if []planInstance{a, b}[i%2].get(t) == http.StatusOK {
			admitted++
		}
	}
	assert.Equal(t, 10, admitted, "admitted over the window: max(free, gold), never free + gold")

	// Free again: the next decision on each instance is denied.
	_, err = store.Set(ctx, digest, "free")
	require.NoError(t, err)
	assert.Equal(t, http.StatusTooManyRequests, a.get(t), "lowered at the next decision")
	assert.Equal(t, http.StatusTooManyRequests, b.get(t), "lowered at the next decision")

	// Gold again: what it consumed on gold is remembered, so moving back
	// and forth hands out nothing.
	change, err = store.Set(ctx, digest, "gold")
	require.NoError(t, err)
	require.Len(t, change.Moves, 1)
	assert.Equal(t, int64(10), change.Moves[0].Carried, "gold holds the ten it admitted")
	assert.Equal(t, http.StatusTooManyRequests, a.get(t), "no budget from a round trip")
	assert.Equal(t, http.StatusTooManyRequests, b.get(t), "no budget from a round trip")

	// Per-plan decisions and the cache's invalidations are exported.
	var gold, invalidated float64
	for _, in := range []planInstance{a, b} {
		_, text := do(t, http.MethodGet, "http://"+in.srv.Addr()+PathMetrics)
		gold += seriesValue(t, text, `tlb_ratelimit_plan_decisions_total{plan="gold",policy="api",result="allowed"}`)
		invalidated += seriesValue(t, text, `tlb_ratelimit_plan_cache_total{result="invalidated"}`)
	}
	assert.Equal(t, float64(7), gold, "the seven admitted on gold, counted under gold")
	assert.Positive(t, invalidated, "a change drops the cached plan")
}

// seriesValue is the value of the line of text starting with series, 0
// when absent.
func seriesValue(t *testing.T, text, series string) float64 {
	t.Helper()
	for _, line := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			require.NoError(t, err, line)
			return f
		}
	}
	return 0
}

// planStore is the operator's store over the service's keys, and the
// digest of the test client's address (127.0.0.1) as the edge computes it.
func planStore(t *testing.T, cfg config.Config, addr string) (*rateplan.Store, ratelimit.SubjectDigest) {
	t.Helper()
	client := redis.NewClient(&redis.Options{Addr: addr, Protocol: 2})
	t.Cleanup(func() { _ = client.Close() })
	keys, err := keyspace.NewBuilder(cfg.RateLimit.KeyPrefix, cfg.RateLimit.KeySecret)
	require.NoError(t, err)
	store, err := rateplan.NewStore(client, keys, cfg.RateLimit.Policies.Plans, cfg.RateLimit.Policies.Policies)
	require.NoError(t, err)
	res, err := subject.NewResolver(subject.Config{IPv6PrefixLen: cfg.Web.IPv6Prefix})
	require.NoError(t, err)
	id, err := res.Identify(&http.Request{Header: http.Header{}, RemoteAddr: "127.0.0.1:1"})
	require.NoError(t, err)
	pseudo, err := subject.NewPseudonymizer(cfg.Web.SubjectSecret)
	require.NoError(t, err)
	digest, err := pseudo.Digest(id)
	require.NoError(t, err)
	return store, digest
}

// TestPlansFollowAReload (issue 36 item 4): plans reload with the policy
// file: a ConfigMap swap that maps gold to a new policy is served for a
// subject on gold within a second, with no restart and no new assignment.
// The new policy's state starts fresh, as a new revision's does: a change
// made by the file, not by tlbctl plan, carries nothing yet (ADR 0039,
// proposed for revisions; docs/operations.md, "Reloading the policy file").
func TestPlansFollowAReload(t *testing.T) {
	b := newReloadBench(t, plansFile)
	cfg := b.pol.Config()
	store, digest := planStore(t, cfg, b.rs.Addr())
	_, err := store.Set(context.Background(), digest, "gold")
	require.NoError(t, err)
	for range 10 {
		require.Equal(t, http.StatusOK, b.get())
	}
	require.Equal(t, http.StatusTooManyRequests, b.get(), "gold's 10 spent")
	// Gold now maps api to api-platinum, 100 an hour.
	next := strings.Replace(plansFile, `{"id": "gold", "policies": {"api": "api-gold"}}`, `{"id": "gold", "policies": {"api": "api-platinum"}}`, 1)
	next = strings.Replace(next, ` ],
 "plans"`, `,
  {"id": "api-platinum", "revision": 1, "algorithm": "fixed_window", "limit": 100, "window": "1h", "maxCost": 1, "cleanupGrace": "1m", "maxClockRegression": "2s", "failurePolicy": "fail-closed"}
 ],
 "plans"`, 1)
	require.NotEqual(t, plansFile, next)
	b.swap(next)
	took := b.waitFor("gold served by api-platinum", effective, func() bool { return b.get() == http.StatusOK })
	t.Logf("the reloaded plans served after %v", took)
	assert.Equal(t, float64(1), b.metric(appliedByFile))
}
