package main

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/programs"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
	"github.com/tech-log/tech-log-backend/app-bootstrap/config"
)

// loginDecideSHA is the SHA1 of the bound decision program the service
// sends for policy "login" of the policy file text.
func loginDecideSHA(t *testing.T, file string) string {
	t.Helper()
	set, err := config.ParsePolicies(strings.NewReader(file))
	require.NoError(t, err)
	login, ok := set.Policy("login")
	require.True(t, ok)
	b, err := programs.ForPolicy(login)
	require.NoError(t, err)
	return b.Decide.SHA1
}

// TestCheckLoadsThePoliciesPrograms: `tlbctl check` loads the programs the
// service sends for the configured policy file (each policy's rendering
// with its parameters as constants, ADR 0035), not a generic set: the
// server then holds the login policy's bound program, and a changed
// parameter in the file changes the SHA1 check verifies and loads.
func TestCheckLoadsThePoliciesPrograms(t *testing.T) {
	rs, env := setup(t)
	before := loginDecideSHA(t, testPolicies)
	r := tlbctl(t, environ(env), "check")
	require.Equal(t, exitOK, r.code, "%s\n%s", r.stdout, r.stderr)
	assert.Regexp(t, `scripts\s+ok\s+loaded the 9 programs the service sends for 3 policies: `, r.stdout)
	assert.Contains(t, r.stdout, "login rate-token-bucket-v1 "+before[:12])

	changed := strings.Replace(testPolicies, `"capacity": 5,`, `"capacity": 6,`, 1)
	require.NotEqual(t, testPolicies, changed)
	after := loginDecideSHA(t, changed)
	require.NotEqual(t, before, after, "a changed parameter is another program")
	require.NoError(t, os.WriteFile(env["APP_RATE_LIMIT_POLICIES_FILE"], []byte(changed), 0o600))
	exists, err := rs.Client().ScriptExists(redistest.AdminCtx(t), before, after).Result()
	require.NoError(t, err)
	require.Equal(t, []bool{true, false}, exists, "only the first check has run")
	r = tlbctl(t, environ(env), "check")
	require.Equal(t, exitOK, r.code, "%s\n%s", r.stdout, r.stderr)
	assert.Contains(t, r.stdout, "login rate-token-bucket-v1 "+after[:12])
	assert.NotContains(t, r.stdout, before[:12])
	exists, err = rs.Client().ScriptExists(redistest.AdminCtx(t), after).Result()
	require.NoError(t, err)
	assert.Equal(t, []bool{true}, exists, "check loaded the changed policy's program")
}

// TestSentProgramsSetOnlyForEnforcedPolicies: the set program is sent for
// a pattern of two enforced policies, never for an enforced policy beside a
// shadow one (a shadow policy never joins a set, ADR 0037).
func TestSentProgramsSetOnlyForEnforcedPolicies(t *testing.T) {
	file := func(secondEnforce string) string {
		return `{"policies": [
  {"id": "api", "revision": 1, "algorithm": "fixed_window", "limit": 5, "window": "1m", "maxCost": 1,
   "cleanupGrace": "1m", "maxClockRegression": "2s", "failurePolicy": "fail-closed", "routes": ["GET /api/"]},
  {"id": "api-next", "enforce": "` + secondEnforce + `", "revision": 1, "algorithm": "fixed_window", "limit": 3, "window": "1m", "maxCost": 1,
   "cleanupGrace": "1m", "maxClockRegression": "2s", "failurePolicy": "fail-closed", "routes": ["GET /api/"]}]}`
	}
	hasSet := func(enforce string) bool {
		set, err := config.ParsePolicies(strings.NewReader(file(enforce)))
		require.NoError(t, err)
		sent, err := sentPrograms(config.Config{RateLimit: config.RateLimit{Policies: set}})
		require.NoError(t, err)
		for _, s := range sent {
			if s.policy == "(set)" {
				return true
			}
		}
		return false
	}
	assert.True(t, hasSet("enforce"), "two enforced policies on a pattern: a set")
	assert.False(t, hasSet("shadow"), "an enforced policy beside a shadow one: no set")
}
