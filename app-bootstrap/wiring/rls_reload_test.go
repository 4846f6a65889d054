package wiring

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
)

// configMapSwap lays dir out the way the kubelet updates a ConfigMap
// mount: the files in a new timestamped directory, ..data swapped to it by
// an atomic rename of a symlink, each file a symlink through ..data, and
// the previous timestamped directory removed.
func configMapSwap(t *testing.T, dir, stamp, name, text string) {
	t.Helper()
	require.NoError(t, os.Mkdir(filepath.Join(dir, stamp), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, stamp, name), []byte(text), 0o600))
	old, _ := os.Readlink(filepath.Join(dir, "..data"))
	require.NoError(t, os.Symlink(stamp, filepath.Join(dir, "..data_tmp")))
	require.NoError(t, os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")))
	if _, err := os.Lstat(filepath.Join(dir, name)); errors.Is(err, os.ErrNotExist) {
		require.NoError(t, os.Symlink(filepath.Join("..data", name), filepath.Join(dir, name)))
	}
	if old != "" {
		require.NoError(t, os.RemoveAll(filepath.Join(dir, old)))
	}
}

// remoteAddressRule is rlsRules' shape with remote_address at n an hour.
func remoteAddressRule(n int) string {
	return fmt.Sprintf("domain: web\ndescriptors:\n  - key: remote_address\n    rate_limit: {unit: hour, requests_per_unit: %d}\n", n)
}

// TestRLSReloadsAConfigMapSwap: the service as the binary composes it,
// its APP_RLS_CONFIG_DIR a ConfigMap mount. A swap to a raised limit is
// applied (counted) and served at once by the watcher, with no restart,
// and a subject keeps what it spent in the window under the old limit; a
// swap to a broken file is refused whole, counted, and the previous set
// keeps serving. Every wait is bounded (5 s; the watcher's debounce is
// 100 ms).
func TestRLSReloadsAConfigMapSwap(t *testing.T) {
	rs := redistest.Start(t)
	dir := t.TempDir()
	configMapSwap(t, dir, "..2026_12_07_00_00_00.000000001", "web.yaml", remoteAddressRule(1))
	cfg := loadConfig(t, append(enabledKV(rs.Addr()), "APP_RLS_ADDR", "127.0.0.1:0", "APP_RLS_CONFIG_DIR", dir)...)
	var srv *RLSServer
	var web *Server
	app := fxtest.New(t, Options(cfg, quietLogger()), fx.Populate(&srv, &web))
	app.RequireStart()
	defer app.RequireStop()
	c := rlsClient(t, srv.Addr())
	metric := func(result string) string {
		_, text := do(t, http.MethodGet, "http://"+web.Addr()+PathMetrics)
		for _, line := range strings.Split(text, "\n") {
			if strings.HasPrefix(line, `tlb_rls_reloads_total{result="`+result+`"} `) {
				return strings.TrimPrefix(line, `tlb_rls_reloads_total{result="`+result+`"} `)
			}
		}
		return "0"
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for !cond() {
			require.True(t, time.Now().Before(deadline), "%s: not seen within 5 s", what)
			time.Sleep(20 * time.Millisecond)
		}
	}

	// Another subject for each step, so no budget carried from a step
	// decides the next one (but the one that checks the carry).
	began := time.Now()
	assert.Equal(t, pb.RateLimitResponse_OK, shouldRateLimit(t, c, "remote_address", "192.0.2.10"))
	assert.Equal(t, pb.RateLimitResponse_OVER_LIMIT, shouldRateLimit(t, c, "remote_address", "192.0.2.10"), "limit 1")

	configMapSwap(t, dir, "..2026_12_07_00_00_01.000000002", "web.yaml", remoteAddressRule(3))
	waitFor("the raised limit applied", func() bool { return metric("applied") == "1" })
	for i := range 3 {
		require.Equal(t, pb.RateLimitResponse_OK, shouldRateLimit(t, c, "remote_address", "192.0.2.11"), "limit 3, request %d", i+1)
	}
	assert.Equal(t, pb.RateLimitResponse_OVER_LIMIT, shouldRateLimit(t, c, "remote_address", "192.0.2.11"), "limit 3")
	// The subject that spent 1 under the old limit gets 2 more in the
	// same window, not a fresh 3: no free budget at the change. (An hour
	// window; the check is void only when the run crossed an hour.)
	got := []pb.RateLimitResponse_Code{}
	for range 3 {
		got = append(got, shouldRateLimit(t, c, "remote_address", "192.0.2.10"))
	}
	if began.Truncate(time.Hour).Equal(time.Now().Truncate(time.Hour)) {
		assert.Equal(t, []pb.RateLimitResponse_Code{pb.RateLimitResponse_OK, pb.RateLimitResponse_OK, pb.RateLimitResponse_OVER_LIMIT}, got,
			"the raised limit counts what the subject spent in the window")
	}

	configMapSwap(t, dir, "..2026_12_07_00_00_02.000000003", "web.yaml",
		"domain: web\ndescriptors:\n  - key: remote_address\n    rate_limit: {unit: fortnight, requests_per_unit: 9}\n")
	waitFor("the broken file refused", func() bool { return metric("refused") == "1" })
	assert.Equal(t, "1", metric("applied"), "a refused set is not applied")
	for i := range 3 {
		require.Equal(t, pb.RateLimitResponse_OK, shouldRateLimit(t, c, "remote_address", "192.0.2.12"), "the previous set (3) serves, request %d", i+1)
	}
	assert.Equal(t, pb.RateLimitResponse_OVER_LIMIT, shouldRateLimit(t, c, "remote_address", "192.0.2.12"), "the previous set (3) serves")
}
