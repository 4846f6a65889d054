package wiring

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
)

// TestRestartOnANewRevisionCarries (issue 36 item 3, ADR 0039): a process
// started on revision 2 of a policy, after one that served revision 1 has
// stopped (a restart, a rolling deploy), finds revision 1 in the server's
// catalog and carries what the subject spent: 2 of revision 1's 2, so 3 of
// revision 2's 5, not a fresh 5.
func TestRestartOnANewRevisionCarries(t *testing.T) {
	rs := redistest.Start(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "policies.json")
	serve := func(file string, statuses ...int) {
		t.Helper()
		require.NoError(t, os.WriteFile(path, []byte(file), 0o600))
		cfg := loadConfig(t, append(enabledKV(rs.Addr()), "APP_RATE_LIMIT_POLICIES_FILE", path)...)
		var srv *Server
		app := fxtest.New(t, Options(cfg, quietLogger()), fx.Populate(&srv))
		app.RequireStart()
		defer app.RequireStop()
		var got []int
		for range statuses {
			resp, _ := do(t, http.MethodGet, "http://"+srv.Addr()+PathPing)
			got = append(got, resp.StatusCode)
		}
		assert.Equal(t, statuses, got)
	}
	serve(reloadPolicy(2, 1), 200, 200, 429)
	serve(reloadPolicy(5, 2), 200, 200, 200, 429)
}
