package wiring

import (
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"
	"go.uber.org/goleak"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
)

// reloadPolicy is a policy file with one policy, api: a fixed window of
// limit requests an hour at revision, limiting every API route.
func reloadPolicy(limit, revision int) string {
	return fmt.Sprintf(`{"policies": [{"id": "api", "revision": %d, "algorithm": "fixed_window", "limit": %d, "window": "1h", "maxCost": 1, "cleanupGrace": "1m", "maxClockRegression": "2s", "failurePolicy": "fail-closed", "routes": ["GET /api/"]}]}`, revision, limit)
}

// effective is the bound: a reload takes effect within a second.
const effective = time.Second

// reloadBench is the service as the binary composes it (Options), its
// APP_RATE_LIMIT_POLICIES_FILE in a ConfigMap-style mount.
type reloadBench struct {
	t     *testing.T
	dir   string
	swaps int
	srv   *Server
	pol   *Policies
	logs  *lockedBuffer
	rs    *redistest.Server
}

func newReloadBench(t *testing.T, first string, kv ...string) *reloadBench {
	t.Helper()
	rs := redistest.Start(t)
	b := &reloadBench{t: t, dir: t.TempDir(), rs: rs}
	b.swap(first)
	cfg := loadConfig(t, append(append(enabledKV(rs.Addr()), "APP_RATE_LIMIT_POLICIES_FILE", filepath.Join(b.dir, "policies.json")), kv...)...)
	b.logs = &lockedBuffer{}
	app := fxtest.New(t, Options(cfg, newTextLogger(b.logs)), fx.Populate(&b.srv, &b.pol))
	app.RequireStart()
	t.Cleanup(app.RequireStop)
	return b
}

// swap replaces the file the way the kubelet updates a ConfigMap mount.
func (b *reloadBench) swap(text string) time.Time {
	b.t.Helper()
	b.swaps++
	configMapSwap(b.t, b.dir, fmt.Sprintf("..2026_12_07_00_00_00.%09d", b.swaps), "policies.json", text)
	return time.Now()
}

func (b *reloadBench) get() int {
	b.t.Helper()
	resp, _ := do(b.t, http.MethodGet, "http://"+b.srv.Addr()+PathPing)
	return resp.StatusCode
}

// metric is the value of the series line starting with series, 0 when
// absent.
func (b *reloadBench) metric(series string) float64 {
	b.t.Helper()
	_, text := do(b.t, http.MethodGet, "http://"+b.srv.Addr()+PathMetrics)
	return seriesValue(b.t, text, series)
}

// waitFor polls cond for at most bound.
func (b *reloadBench) waitFor(what string, bound time.Duration, cond func() bool) time.Duration {
	b.t.Helper()
	start := time.Now()
	for !cond() {
		require.Less(b.t, time.Since(start), bound, "%s: not within %v\n%s", what, bound, b.logs.String())
		time.Sleep(10 * time.Millisecond)
	}
	return time.Since(start)
}

const (
	appliedByFile   = `tlb_ratelimit_policy_reloads_total{result="applied",trigger="file"}`
	refusedByFile   = `tlb_ratelimit_policy_reloads_total{result="refused",trigger="file"}`
	unchangedByFile = `tlb_ratelimit_policy_reloads_total{result="unchanged",trigger="file"}`
	apiRevision     = `tlb_ratelimit_policy_revision{policy="api"}`
)

// TestPolicyReloadConfigMapSwap (issue 36 items 3 and 4): a swap raising
// api's limit under a new revision is served within a second, with no
// restart: the subject denied under the old limit is admitted again, up to
// the new limit less what it spent under the old one (carried, ADR 0039),
// counted applied, and the revision gauge follows. The same file swapped in again, or the same policies in other
// bytes, is unchanged.
func TestPolicyReloadConfigMapSwap(t *testing.T) {
	noLeaks(t)
	b := newReloadBench(t, reloadPolicy(2, 1))
	require.Equal(t, []int{200, 200, 429}, []int{b.get(), b.get(), b.get()})
	require.Equal(t, 1.0, b.metric(apiRevision))

	b.swap(reloadPolicy(5, 2))
	took := b.waitFor("the raised limit served", effective, func() bool { return b.get() == http.StatusOK })
	t.Logf("a ConfigMap swap served in %v", took)
	// The two spent under revision 1 count against revision 2 (ADR 0039):
	// 5 in all over the window, not 2 + 5.
	for range 2 {
		require.Equal(t, http.StatusOK, b.get(), "within the new limit of 5, less the 2 spent")
	}
	require.Equal(t, http.StatusTooManyRequests, b.get(), "the new limit holds, the carried 2 included")
	assert.Equal(t, 1.0, b.metric(`tlb_ratelimit_carry_total{policy="api",result="carried"}`), "one subject carried")
	assert.Equal(t, 1.0, b.metric(appliedByFile))
	assert.Equal(t, 2.0, b.metric(apiRevision))
	assert.Contains(t, b.logs.String(), "policies reloaded")

	b.swap(reloadPolicy(5, 2))
	b.waitFor("the same file counted unchanged", effective, func() bool { return b.metric(unchangedByFile) == 1 })
	b.swap("\n" + reloadPolicy(5, 2) + "\n")
	b.waitFor("other bytes, the same policies, counted unchanged", effective, func() bool { return b.metric(unchangedByFile) == 2 })
	assert.Equal(t, 1.0, b.metric(appliedByFile), "an unchanged file is not applied again")
	assert.Equal(t, http.StatusTooManyRequests, b.get(), "and the subject's count goes on")
}

// TestPolicyReloadBrokenFileKeepsServing: a swap to a file that does not
// parse, and to one whose policy breaks a rule, is refused whole, logged
// with the file and the reason, counted refused; the previous policies
// keep serving (the subject's count goes on: 200 then 429).
func TestPolicyReloadBrokenFileKeepsServing(t *testing.T) {
	noLeaks(t)
	b := newReloadBench(t, reloadPolicy(2, 1))
	require.Equal(t, http.StatusOK, b.get())

	b.swap(`{"policies": [`)
	b.waitFor("the broken file refused", effective, func() bool { return b.metric(refusedByFile) == 1 })
	b.swap(reloadPolicy(0, 2))
	b.waitFor("the invalid policy refused", effective, func() bool { return b.metric(refusedByFile) == 2 })

	logs := b.logs.String()
	assert.Contains(t, logs, "policy reload refused; the previous policies keep serving")
	assert.Contains(t, logs, "APP_RATE_LIMIT_POLICIES_FILE")
	assert.Contains(t, logs, filepath.Join(b.dir, "policies.json"))
	assert.Contains(t, logs, "policies[0] (api)", "the policy at fault is named")
	assert.Contains(t, logs, "limit", "the field at fault is named")
	assert.Equal(t, 1.0, b.metric(apiRevision), "revision 1 still serves")
	assert.Zero(t, b.metric(appliedByFile))
	require.Equal(t, []int{200, 429}, []int{b.get(), b.get()}, "the old limit of 2 still serves")
}

// TestPolicyReloadSameRevisionChangeRefused: api's limit changed under the
// revision it serves is refused, naming the policy; the old limit keeps
// serving. The same change under a new revision is applied.
func TestPolicyReloadSameRevisionChangeRefused(t *testing.T) {
	noLeaks(t)
	b := newReloadBench(t, reloadPolicy(1, 1))
	require.Equal(t, []int{200, 429}, []int{b.get(), b.get()})

	b.swap(reloadPolicy(5, 1))
	b.waitFor("the change refused", effective, func() bool { return b.metric(refusedByFile) == 1 })
	assert.Contains(t, b.logs.String(), `policy \"api\": changed without a new revision`)
	assert.Equal(t, http.StatusTooManyRequests, b.get(), "the old limit still serves")

	// A call (SIGHUP's path) says the same, and wraps the refusal.
	err := b.pol.Reload()
	require.ErrorIs(t, err, ErrPolicyReloadRefused)
	require.ErrorIs(t, err, ErrChangedWithoutRevision)
	assert.Contains(t, err.Error(), `policy "api": changed without a new revision`)
	assert.Contains(t, err.Error(), "APP_RATE_LIMIT_POLICIES_FILE")

	b.swap(reloadPolicy(5, 2))
	b.waitFor("the new revision applied", effective, func() bool { return b.get() == http.StatusOK })
}

// TestPolicyReloadDropsStaleDenials: a denial the old generation's denial
// cache holds (served from memory: the hit is counted) is never served
// after a raise; the new generation's cache starts empty, and the subject
// is admitted within a second of the swap.
func TestPolicyReloadDropsStaleDenials(t *testing.T) {
	noLeaks(t)
	b := newReloadBench(t, reloadPolicy(1, 1))
	require.Equal(t, []int{200, 429}, []int{b.get(), b.get()})
	// Denied until a denial comes from the cache (once its subscription
	// is confirmed live): 100 attempts at most.
	for i := 0; b.metric("tlb_ratelimit_denial_cache_hits_total") == 0; i++ {
		require.Less(t, i, 100, "no denial from the cache")
		require.Equal(t, http.StatusTooManyRequests, b.get())
		time.Sleep(20 * time.Millisecond)
	}
	require.GreaterOrEqual(t, b.metric("tlb_ratelimit_denial_cache_entries"), 1.0)

	b.swap(reloadPolicy(3, 2))
	b.waitFor("the subject admitted under the raised limit", effective, func() bool { return b.get() == http.StatusOK })
	assert.Zero(t, b.metric("tlb_ratelimit_denial_cache_entries"), "the new generation's cache holds no denial of the old limit")
	assert.Zero(t, b.metric("tlb_ratelimit_denial_cache_hits_total"))
}

// TestPolicyReloadInFlightFinishesOnItsGeneration: a reload while
// requests are served swaps generations under them: every request is
// answered (200 or 429, never a 503 of a closed generation), and the
// previous generation closes once they are done.
func TestPolicyReloadInFlightFinishesOnItsGeneration(t *testing.T) {
	noLeaks(t)
	b := newReloadBench(t, reloadPolicy(1000, 1))
	done := make(chan []int)
	go func() {
		var codes []int
		for range 200 {
			resp, err := httpClient().Get("http://" + b.srv.Addr() + PathPing)
			if err != nil {
				codes = append(codes, -1)
				continue
			}
			_ = resp.Body.Close()
			codes = append(codes, resp.StatusCode)
		}
		done <- codes
	}()
	for i := range 5 {
		b.swap(reloadPolicy(1000+i+1, i+2))
		time.Sleep(50 * time.Millisecond)
	}
	codes := <-done
	for i, c := range codes {
		require.Equal(t, http.StatusOK, c, "request %d", i)
	}
	b.waitFor("the last revision serving", effective, func() bool { return b.metric(apiRevision) == 6 })
}

// newTextLogger logs every level, as text, to w.
func newTextLogger(w *lockedBuffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// noLeaks checks, after the service has stopped (a cleanup registered
// before the bench's runs after them), that no goroutine is left.
func noLeaks(t *testing.T) {
	opt := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, opt) })
}

// shadowPair is api (enforced, 1000 an hour) and api-next (2 an hour,
// shadow unless enforced) on every API route.
func shadowPair(enforced bool) string {
	enforce := "shadow"
	if enforced {
		enforce = "enforce"
	}
	return `{"policies": [
  {"id": "api", "revision": 1, "algorithm": "fixed_window", "limit": 1000, "window": "1h", "maxCost": 1, "cleanupGrace": "1m", "maxClockRegression": "2s", "failurePolicy": "fail-closed", "routes": ["GET /api/"]},
  {"id": "api-next", "enforce": "` + enforce + `", "revision": 1, "algorithm": "fixed_window", "limit": 2, "window": "1h", "maxCost": 1, "cleanupGrace": "1m", "maxClockRegression": "2s", "failurePolicy": "fail-closed", "routes": ["GET /api/"]}
]}`
}

// TestPolicyReloadPromotesAShadowPolicy: a shadow policy (ADR 0037)
// promoted to enforced under its revision is applied (enforcement changes
// no key), and what it counted in the dark carries on: the subject it
// would have denied is denied within a second of the swap.
func TestPolicyReloadPromotesAShadowPolicy(t *testing.T) {
	noLeaks(t)
	b := newReloadBench(t, shadowPair(false))
	require.Equal(t, []int{200, 200, 200}, []int{b.get(), b.get(), b.get()}, "api-next only counts")
	b.waitFor("api-next's would-deny counted", effective, func() bool {
		return b.metric(`tlb_ratelimit_shadow_decisions_total{policy="api-next",result="would_deny"}`) >= 1
	})

	b.swap(shadowPair(true))
	b.waitFor("api-next enforced, its count carried on", effective, func() bool { return b.get() == http.StatusTooManyRequests })
	assert.Equal(t, 1.0, b.metric(appliedByFile))
	assert.Zero(t, b.metric(refusedByFile), "no new revision needed")
}
