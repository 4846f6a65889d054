package config

import (
	"errors"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// reloadFile is a policy file with api's capacity and login's dedup
// window as given ("" leaves login without one).
func reloadFile(capacity, dedup string) string {
	login := `{"id": "login", "revision": 3, "algorithm": "fixed_window", "limit": 5, "window": "1m", "maxCost": 1, "cleanupGrace": "1m", "maxClockRegression": "2s", "failurePolicy": "fail-closed", "routes": ["POST /api/v1/login"]`
	if dedup != "" {
		login += `, "dedupWindow": "` + dedup + `"`
	}
	return `{"policies": [
  {"id": "api", "revision": 1, "algorithm": "token_bucket", "capacity": ` + capacity + `, "refillTokens": 10, "refillPeriod": "1s", "maxCost": 10, "cleanupGrace": "1m", "maxClockRegression": "2s", "failurePolicy": "fail-closed", "routes": ["GET /api/"]},
  ` + login + `}
]}`
}

// TestReloadPolicies: the file is read again and checked as Load checks
// it; the rest of the configuration is kept, the derived evaluation
// timeout follows the new policies, and a file that does not pass is an
// error naming the variable, the file and the policy at fault.
func TestReloadPolicies(t *testing.T) {
	path := writeFile(t, "policies.json", reloadFile("100", ""))
	cfg, err := Load(with(enabledEnv(), "APP_RATE_LIMIT_POLICIES_FILE", path))
	require.NoError(t, err)
	before := cfg.Web.EvaluationTimeout

	require.NoError(t, os.WriteFile(path, []byte(reloadFile("200", "10s")), 0o600))
	next, err := ReloadPolicies(cfg)
	require.NoError(t, err)
	api, ok := next.RateLimit.Policies.Policy("api")
	require.True(t, ok)
	assert.Contains(t, api.String(), "200", "the new capacity")
	assert.Equal(t, cfg.RateLimit.KeyPrefix, next.RateLimit.KeyPrefix)
	assert.Equal(t, cfg.RateLimit.DefaultPolicy, next.RateLimit.DefaultPolicy)
	assert.Greater(t, next.Web.EvaluationTimeout, before, "a dedup window derives a longer evaluation timeout")

	require.NoError(t, os.WriteFile(path, []byte(reloadFile("0", "")), 0o600))
	_, err = ReloadPolicies(cfg)
	require.Error(t, err)
	ves := VarErrors(err)
	require.NotEmpty(t, ves)
	assert.Equal(t, "APP_RATE_LIMIT_POLICIES_FILE", ves[0].Var)
	assert.Contains(t, err.Error(), path)
	assert.Contains(t, err.Error(), "(api)")
	assert.ErrorIs(t, err, ErrPolicyFile)

	// The default policy must still be defined.
	require.NoError(t, os.WriteFile(path, []byte(`{"policies": [{"id": "other", "revision": 1, "algorithm": "fixed_window", "limit": 5, "window": "1m", "maxCost": 1, "cleanupGrace": "1m", "maxClockRegression": "2s", "failurePolicy": "fail-closed"}]}`), 0o600))
	_, err = ReloadPolicies(cfg)
	require.Error(t, err)
	assert.Equal(t, "APP_RATE_LIMIT_DEFAULT_POLICY", VarErrors(err)[0].Var, "%v", err)
}

// TestReloadPoliciesKeepsAnExplicitTimeout: APP_WEB_EVALUATION_TIMEOUT,
// when set, is not derived again.
func TestReloadPoliciesKeepsAnExplicitTimeout(t *testing.T) {
	path := writeFile(t, "policies.json", reloadFile("100", ""))
	cfg, err := Load(with(enabledEnv(), "APP_RATE_LIMIT_POLICIES_FILE", path, "APP_WEB_EVALUATION_TIMEOUT", "3s"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, []byte(reloadFile("100", "10s")), 0o600))
	next, err := ReloadPolicies(cfg)
	require.NoError(t, err)
	assert.Equal(t, 3*time.Second, next.Web.EvaluationTimeout)
}

// TestReloadPoliciesWithoutAFile: given policies, or the limiter off, are
// nothing to reload.
func TestReloadPoliciesWithoutAFile(t *testing.T) {
	cfg, err := Load(map[string]string{})
	require.NoError(t, err)
	_, err = ReloadPolicies(cfg)
	assert.True(t, errors.Is(err, ErrNoPolicyFile), "%v", err)
}
