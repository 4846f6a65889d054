package wiring

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
)

// rlsSetRules: user under the policy file's login (5 a minute, the HTTP
// edge's budget), remote_address at 3 a minute and path at 10.
const rlsSetRules = rlsRules + `  - key: path
    rate_limit: {unit: minute, requests_per_unit: 10}
`

// TestRLSOneProgramCallPerRequest (issue 35): a request of three
// descriptors is one program call on the server (one EvaluateSet of the
// set program, INFO commandstats), each descriptor counted under its own
// subject; user=alice still draws on the HTTP edge's login budget of 5
// for the principal alice; a request refused by one descriptor is one
// call too, takes nothing of the others and reports each its own code.
func TestRLSOneProgramCallPerRequest(t *testing.T) {
	rs := redistest.Start(t)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "web.yaml"), []byte(rlsSetRules), 0o600))
	cfg := loadConfig(t, rlsKV(rs.Addr(), dir,
		"APP_WEB_IDENTITY", "trusted-header", "APP_WEB_IDENTITY_HEADER", "X-Authenticated-User",
		"APP_WEB_TRUSTED_PROXIES", "127.0.0.1")...)
	var srv *RLSServer
	var web *Server
	app := fxtest.New(t, Options(cfg, quietLogger()), fx.Populate(&srv, &web))
	app.RequireStart()
	defer app.RequireStop()
	c := rlsClient(t, srv.Addr())
	login := func() int {
		req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, "http://"+web.Addr()+PathLogin, strings.NewReader("{}"))
		require.NoError(t, err)
		req.Header.Set("X-Authenticated-User", "alice")
		resp, err := httpClient().Do(req)
		require.NoError(t, err)
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	ask := func(addr string) (*pb.RateLimitResponse, int64) {
		before := scriptCalls(t, rs)
		resp := rlsAsk(t, c, "user", "alice", "remote_address", addr, "path", "/x")
		return resp, scriptCalls(t, rs) - before
	}

	// Warm-up of other subjects: the set program's first run may be an
	// EVALSHA answered NOSCRIPT, then EVAL.
	require.Equal(t, pb.RateLimitResponse_OK, rlsAsk(t, c, "user", "bob", "remote_address", "192.0.2.9", "path", "/warm").GetOverallCode())

	// login: 3 by the RLS and 2 by the edge, alternating; remote_address
	// 192.0.2.1 spends its 3.
	for i := range 3 {
		resp, calls := ask("192.0.2.1")
		require.Equal(t, pb.RateLimitResponse_OK, resp.GetOverallCode(), "request %d", i+1)
		assert.Equal(t, int64(1), calls, "request %d: one program call for 3 descriptors", i+1)
		assert.Equal(t, uint32(2-i), resp.GetStatuses()[1].GetLimitRemaining(), "remote_address's own subject")
		assert.Equal(t, uint32(9-i), resp.GetStatuses()[2].GetLimitRemaining(), "path's own subject")
		if i < 2 {
			require.Equal(t, http.StatusOK, login(), "edge login %d", i+1)
		}
	}
	assert.Equal(t, http.StatusTooManyRequests, login(), "the edge's alice: the budget of 5 is spent")

	// Refused by user=alice alone: one call, each descriptor its own code,
	// nothing taken from the others.
	resp, calls := ask("192.0.2.2")
	assert.Equal(t, int64(1), calls, "one program call for a refused request")
	var got []pb.RateLimitResponse_Code
	for _, st := range resp.GetStatuses() {
		got = append(got, st.GetCode())
	}
	assert.Equal(t, pb.RateLimitResponse_OVER_LIMIT, resp.GetOverallCode())
	assert.Equal(t, []pb.RateLimitResponse_Code{pb.RateLimitResponse_OVER_LIMIT, pb.RateLimitResponse_OK, pb.RateLimitResponse_OK}, got)
	assert.Equal(t, uint32(3), resp.GetStatuses()[1].GetLimitRemaining(), "192.0.2.2 as it stands")
	assert.Equal(t, uint32(7), resp.GetStatuses()[2].GetLimitRemaining(), "path as it stands")
	assert.Equal(t, pb.RateLimitResponse_OK, shouldRateLimit(t, c, "path", "/x"), "path: 3 of 10 taken, not 4")
	resp = rlsAsk(t, c, "path", "/x")
	assert.Equal(t, uint32(5), resp.GetStatuses()[0].GetLimitRemaining(), "path: 5 of 10 taken")
}
