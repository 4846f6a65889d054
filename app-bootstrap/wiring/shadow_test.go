package wiring

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
	"github.com/tech-log/tech-log-backend/app-bootstrap/metrics"
)

// TestShadowPolicyBesideEnforced is the dark launch of ADR 0037 on the
// service against a real redis-server: GET /api/ is limited by the
// enforced "api" (5 a minute) and the shadow "api-next" (2 a minute,
// testdata/shadow-policies.json). Requests 1..5 are served, the fields
// are api's only, and requests 3..5 are counted would_deny for api-next;
// request 6 is api's 429 (and api-next, asked beside it, would deny it
// too).
func TestShadowPolicyBesideEnforced(t *testing.T) {
	rs := redistest.Start(t)
	cfg := loadConfig(t, append(enabledKV(rs.Addr()), "APP_RATE_LIMIT_POLICIES_FILE", "testdata/shadow-policies.json")...)
	var srv *Server
	app := fxtest.New(t, Options(cfg, quietLogger()), fx.Populate(&srv))
	app.RequireStart()
	t.Cleanup(app.RequireStop)
	base := "http://" + srv.Addr()

	for i := 1; i <= 6; i++ {
		resp, body := do(t, http.MethodGet, base+PathPing)
		want := http.StatusOK
		if i == 6 {
			want = http.StatusTooManyRequests
		}
		require.Equal(t, want, resp.StatusCode, "request %d: %s", i, body)
		assert.Equal(t, `"api";q=5;w=60`, resp.Header.Get("RateLimit-Policy"), "request %d: the enforced policy's fields only", i)
		assert.True(t, strings.HasPrefix(resp.Header.Get("RateLimit"), `"api";r=`+strconv.Itoa(max(5-i, 0))+`;`), "request %d: RateLimit %q", i, resp.Header.Get("RateLimit"))
		// The shadow call runs beside the enforced one and is counted
		// when it returns, which may be just after the response.
		wantAllow, wantDeny := min(i, 2), max(i-2, 0)
		require.Eventually(t, func() bool {
			return shadowCount(t, base, "would_allow") == wantAllow && shadowCount(t, base, "would_deny") == wantDeny
		}, 5*time.Second, 10*time.Millisecond, "request %d: want would_allow %d, would_deny %d; have %d, %d",
			i, wantAllow, wantDeny, shadowCount(t, base, "would_allow"), shadowCount(t, base, "would_deny"))
	}
	assert.Zero(t, shadowCount(t, base, "undecided"))
}

// shadowCount is api-next's ShadowDecisionsTotal sample for result in
// the service's /metrics; -1 when there is none.
func shadowCount(t *testing.T, base, result string) int {
	t.Helper()
	_, body := do(t, http.MethodGet, base+PathMetrics)
	prefix := fmt.Sprintf(`%s{policy="api-next",result=%q} `, metrics.ShadowDecisionsTotal, result)
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, prefix); ok {
			n, err := strconv.Atoi(v)
			require.NoError(t, err, line)
			return n
		}
	}
	return -1
}
