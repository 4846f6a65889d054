package config

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

func gcraDef(id string, routes ...string) PolicyDef {
	return PolicyDef{Spec: ratelimit.PolicySpec{
		ID: ratelimit.PolicyID(id), Revision: 1, Algorithm: ratelimit.AlgorithmGCRA,
		Params:  ratelimit.GCRA{Rate: 10, Period: time.Second, Burst: 10},
		MaxCost: 1, CleanupGrace: time.Minute, MaxClockRegression: 2 * time.Second,
		FailurePolicy: ratelimit.FailClosed,
	}, Routes: routes}
}

// TestNewPolicySet: Go definitions get the policy file's checks: a
// duplicate ID, a route conflict and a queue above the delay cap are
// problems naming the definition.
func TestNewPolicySet(t *testing.T) {
	set, err := NewPolicySet([]PolicyDef{gcraDef("api", "GET /api/"), gcraDef("day", "GET /api/")})
	require.NoError(t, err)
	assert.Len(t, set.Policies, 2)
	assert.Equal(t, []Route{{"GET /api/", "api"}, {"GET /api/", "day"}}, set.Routes, "one pattern, two policies: a set")

	long := gcraDef("queue")
	long.Spec.Algorithm = ratelimit.AlgorithmLeakyBucket
	q := ratelimit.LeakyBucket{Rate: 1, Period: time.Second, QueueSize: 25}
	q.MaxDelay = q.LongestDelay()
	long.Spec.Params = q
	_, err = NewPolicySet([]PolicyDef{gcraDef("api"), gcraDef("api"), gcraDef("x", "GET /{x"), long})
	require.ErrorIs(t, err, ErrPolicyFile)
	for _, want := range []string{`policies[1] (api): id "api" is already used by policies[0]`, `policies[2] (x): route "GET /{x"`, `policies[3] (queue): maxDelay 25s`} {
		assert.ErrorContains(t, err, want)
	}
	_, err = NewPolicySet(nil)
	assert.ErrorIs(t, err, ErrPolicyFile)
}

// TestLoadWith: the given policies replace the policy file; everything
// else is Load's, the default policy checked against the given set, and a
// policy file beside them is a conflict.
func TestLoadWith(t *testing.T) {
	set, err := NewPolicySet([]PolicyDef{gcraDef("api")})
	require.NoError(t, err)
	env := with(enabledEnv(), "APP_RATE_LIMIT_POLICIES_FILE", "<unset>")
	cfg, err := LoadWith(env, set)
	require.NoError(t, err)
	assert.Equal(t, PoliciesGiven, cfg.RateLimit.PoliciesSource)
	assert.Equal(t, set.Policies, cfg.RateLimit.Policies.Policies)
	assert.Equal(t, 2*cfg.RateLimit.CommandTimeout, cfg.Web.EvaluationTimeout, "derived as Load derives it")

	_, err = LoadWith(enabledEnv(), set)
	assert.ErrorIs(t, err, ErrConflict)
	_, err = LoadWith(with(env, "APP_RATE_LIMIT_DEFAULT_POLICY", "login"), set)
	var ve *VarError
	require.True(t, errors.As(err, &ve))
	assert.Equal(t, "APP_RATE_LIMIT_DEFAULT_POLICY", ve.Var)
}
