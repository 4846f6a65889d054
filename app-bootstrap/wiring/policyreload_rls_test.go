package wiring

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
)

// policiesWithExtra is reloadPolicy's api plus, when extra, a policy
// "extra" (one request an hour) that no route names.
func policiesWithExtra(limit, revision int, extra bool) string {
	text := fmt.Sprintf(`{"id": "api", "revision": %d, "algorithm": "fixed_window", "limit": %d, "window": "1h", "maxCost": 1, "cleanupGrace": "1m", "maxClockRegression": "2s", "failurePolicy": "fail-closed", "routes": ["GET /api/"]}`, revision, limit)
	if extra {
		text += `, {"id": "extra", "revision": 1, "algorithm": "fixed_window", "limit": 1, "window": "1h", "maxCost": 1, "cleanupGrace": "1m", "maxClockRegression": "2s", "failurePolicy": "fail-closed"}`
	}
	return `{"policies": [` + text + `]}`
}

// rlsPolicyRules name the policy file's policies: user by api, tenant by
// extra.
const rlsPolicyRules = `domain: web
descriptors:
  - key: user
    rate_limit: {policy: api}
  - key: tenant
    rate_limit: {policy: extra}
`

// TestPolicyReloadRLSFollows: the RLS's `rate_limit: {policy: X}` rules
// serve the reloaded policy: a raised api (new revision) admits the
// denied user again within a second, through the RLS's next rule
// generation. A policy file dropping a policy a rule names is refused
// whole (naming the RLS, the rule and the policy), and both the edge and
// the RLS keep serving the previous policies.
func TestPolicyReloadRLSFollows(t *testing.T) {
	noLeaks(t)
	rs := redistest.Start(t)
	rules := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(rules, "web.yaml"), []byte(rlsPolicyRules), 0o600))
	b := &reloadBench{t: t, dir: t.TempDir(), logs: &lockedBuffer{}}
	b.swap(policiesWithExtra(1, 1, true))
	cfg := loadConfig(t, rlsKV(rs.Addr(), rules, "APP_RATE_LIMIT_POLICIES_FILE", filepath.Join(b.dir, "policies.json"))...)
	var srv *RLSServer
	app := fxtest.New(t, Options(cfg, newTextLogger(b.logs)), fx.Populate(&b.srv, &b.pol, &srv))
	app.RequireStart()
	t.Cleanup(app.RequireStop)
	c := rlsClient(t, srv.Addr())

	require.Equal(t, pb.RateLimitResponse_OK, rlsAsk(t, c, "user", "alice").GetOverallCode())
	require.Equal(t, pb.RateLimitResponse_OVER_LIMIT, rlsAsk(t, c, "user", "alice").GetOverallCode())

	b.swap(policiesWithExtra(3, 2, true))
	b.waitFor("the RLS serving the raised api", effective, func() bool {
		return rlsAsk(t, c, "user", "alice").GetOverallCode() == pb.RateLimitResponse_OK
	})
	resp := rlsAsk(t, c, "user", "alice")
	require.Equal(t, pb.RateLimitResponse_OK, resp.GetOverallCode())
	assert.Equal(t, uint32(3), resp.GetStatuses()[0].GetCurrentLimit().GetRequestsPerUnit(), "the new limit")

	b.swap(policiesWithExtra(3, 2, false))
	b.waitFor("the file without extra refused", effective, func() bool { return b.metric(refusedByFile) == 1 })
	logs := b.logs.String()
	assert.Contains(t, logs, "rls (APP_RLS_CONFIG_DIR)")
	assert.Contains(t, logs, `rule \"web.tenant\" policy \"extra\"`)
	assert.Equal(t, pb.RateLimitResponse_OK, rlsAsk(t, c, "user", "alice").GetOverallCode(), "the third of revision 2's limit of 3")
	assert.Equal(t, pb.RateLimitResponse_OVER_LIMIT, rlsAsk(t, c, "user", "alice").GetOverallCode(), "revision 2 still serves")
	assert.Equal(t, pb.RateLimitResponse_OK, rlsAsk(t, c, "tenant", "acme").GetOverallCode(), "extra still serves")
}
