package config

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// The policy file's "plans" and "defaultPlan" (issue 36): per plan, the
// policy that decides a base policy's routes for a subject on it.

// planPolicy is a token-bucket policy object with id and routes (JSON
// array text, "" for none).
func planPolicy(id, routes string) string {
	fields := replace(tbBase, `"id":"`+id+`"`)
	if routes != "" {
		fields = append(fields, `"routes":`+routes)
	}
	return "{" + strings.Join(fields, ",") + "}"
}

// plansFile is a policy file with api (GET /api/) and login (POST
// /api/v1/login), their plan policies api-free, api-gold and login-gold
// (no routes), and the top-level fields given (JSON text, "" for none).
func plansFile(top string) string {
	policies := strings.Join([]string{
		planPolicy("api", `["GET /api/"]`),
		planPolicy("api-free", ""),
		planPolicy("api-gold", ""),
		planPolicy("login", `["POST /api/v1/login"]`),
		planPolicy("login-gold", ""),
	}, ",\n  ")
	if top != "" {
		top = ",\n" + top
	}
	return "{\"policies\": [\n  " + policies + "\n]" + top + "}"
}

// issuePlans is the issue's example: free and gold tiers of api, free the
// default.
const issuePlans = `"plans": [{"id": "free", "policies": {"api": "api-free"}}, {"id": "gold", "policies": {"api": "api-gold"}}], "defaultPlan": "free"`

func TestParsePoliciesPlans(t *testing.T) {
	set, err := ParsePolicies(strings.NewReader(plansFile(issuePlans)))
	require.NoError(t, err)
	plans := set.Plans
	require.False(t, plans.IsZero())
	assert.Equal(t, []ratelimit.PlanID{"free", "gold"}, plans.IDs())
	assert.Equal(t, ratelimit.PlanID("free"), plans.Default())
	assert.Equal(t, ratelimit.PolicyID("api-gold"), plans.Resolve("gold", "api"))
	assert.Equal(t, ratelimit.PolicyID("api-free"), plans.Resolve("free", "api"))
	assert.Equal(t, ratelimit.PolicyID("api-free"), plans.Resolve("", "api"), "no assignment: the default plan")
	assert.Equal(t, ratelimit.PolicyID("login"), plans.Resolve("gold", "login"), "a policy no plan maps stays as it is")
	assert.Equal(t, []ratelimit.PolicyID{"api"}, plans.Bases())
	assert.Equal(t, []ratelimit.PolicyID{"api-free", "api-gold"}, plans.Family("api"))
	// The plan policies are policies of the set, without routes.
	_, ok := set.Policy("api-gold")
	assert.True(t, ok)
	assert.Equal(t, []Route{{"GET /api/", "api"}, {"POST /api/v1/login", "login"}}, set.Routes)

	t.Run("a base mapped to itself", func(t *testing.T) {
		set, err := ParsePolicies(strings.NewReader(plansFile(
			`"plans": [{"id": "free", "policies": {"api": "api", "login": "login"}}, {"id": "gold", "policies": {"api": "api-gold", "login": "login-gold"}}], "defaultPlan": "free"`)))
		require.NoError(t, err)
		assert.Equal(t, ratelimit.PolicyID("api"), set.Plans.Resolve("free", "api"))
		assert.Equal(t, ratelimit.PolicyID("login-gold"), set.Plans.Resolve("gold", "login"))
		assert.Equal(t, []ratelimit.PolicyID{"api", "login"}, set.Plans.Bases())
	})
	t.Run("a plan mapping nothing", func(t *testing.T) {
		set, err := ParsePolicies(strings.NewReader(plansFile(
			`"plans": [{"id": "free", "policies": {}}, {"id": "gold", "policies": {"api": "api-gold"}}], "defaultPlan": "free"`)))
		require.NoError(t, err)
		assert.Equal(t, ratelimit.PolicyID("api"), set.Plans.Resolve("free", "api"))
		assert.Equal(t, []ratelimit.PolicyID{"api", "api-gold"}, set.Plans.Family("api"))
	})
}

// TestParsePoliciesWithoutPlans: a file without "plans" (or with an empty
// list and no defaultPlan) has the zero Plans: every policy decides as it
// is.
func TestParsePoliciesWithoutPlans(t *testing.T) {
	for _, top := range []string{"", `"plans": []`, `"plans": null`, `"plans": null, "defaultPlan": null`} {
		set, err := ParsePolicies(strings.NewReader(plansFile(top)))
		require.NoError(t, err, top)
		assert.True(t, set.Plans.IsZero(), top)
		assert.Equal(t, ratelimit.PolicyID("api"), set.Plans.Resolve("gold", "api"))
	}
	set, err := ParsePolicies(strings.NewReader(DefaultPoliciesJSON()))
	require.NoError(t, err)
	assert.True(t, set.Plans.IsZero())
}

// TestParsePoliciesPlansRejections: every problem is an error wrapping
// ErrPolicyFile that names the plan, the key and the policy at fault.
func TestParsePoliciesPlansRejections(t *testing.T) {
	for _, tc := range []struct {
		name     string
		top      string
		contains []string
	}{
		{"defaultPlan missing", `"plans": [{"id": "free", "policies": {"api": "api-free"}}]`,
			[]string{"defaultPlan: missing"}},
		{"defaultPlan without plans", `"defaultPlan": "free"`,
			[]string{"invalid plans: no plans"}},
		{"defaultPlan unknown", `"plans": [{"id": "free", "policies": {"api": "api-free"}}], "defaultPlan": "gold"`,
			[]string{`defaultPlan: plan "gold" is not among plans`}},
		{"defaultPlan empty", `"plans": [{"id": "free", "policies": {"api": "api-free"}}], "defaultPlan": ""`,
			[]string{"defaultPlan", `plan id ""`}},
		{"plan without id", `"plans": [{"id": "free", "policies": {}}, {"policies": {"api": "api-gold"}}], "defaultPlan": "free"`,
			[]string{"plans[1]: id is missing"}},
		{"bad plan id", `"plans": [{"id": "free", "policies": {}}, {"id": "Gold", "policies": {}}], "defaultPlan": "free"`,
			[]string{"plans[1].id", `plan id "Gold"`}},
		{"duplicate plan id", `"plans": [{"id": "free", "policies": {}}, {"id": "free", "policies": {}}], "defaultPlan": "free"`,
			[]string{`plans[1].id: plan "free" is given twice`}},
		{"target with routes of its own", `"plans": [{"id": "free", "policies": {"api": "login"}}], "defaultPlan": "free"`,
			[]string{`plans[0] (free): policies["api"]: policy "login" has routes of its own`}},
		{"unknown base", `"plans": [{"id": "free", "policies": {"nope": "api-free"}}], "defaultPlan": "free"`,
			[]string{`plan "free": policies["nope"]: base policy "nope" is not among policies`}},
		{"unknown target", `"plans": [{"id": "free", "policies": {"api": "api-platinum"}}], "defaultPlan": "free"`,
			[]string{`plan "free": policies["api"]: policy "api-platinum" is not among policies`}},
		{"one target for two bases", `"plans": [{"id": "free", "policies": {"api": "api-free", "login": "api-free"}}], "defaultPlan": "free"`,
			[]string{`plan "free": policies["login"]: policy "api-free" already decides base policy "api"`}},
		{"chain", `"plans": [{"id": "free", "policies": {"api": "api-free"}}, {"id": "gold", "policies": {"api-free": "api-gold"}}], "defaultPlan": "free"`,
			[]string{`policy "api-free" is both a base policy and plan policy of base "api"`}},
		{"unknown key in a plan", `"plans": [{"id": "free", "tier": 1, "policies": {"api": "api-free"}}], "defaultPlan": "free"`,
			[]string{`unknown field "tier"`}},
		{"duplicate id in a plan", `"plans": [{"id": "free", "id": "gold", "policies": {"api": "api-free"}}], "defaultPlan": "free"`,
			[]string{`duplicate key "id"`}},
		{"duplicate policies in a plan", `"plans": [{"id": "free", "policies": {"api": "api-free"}, "policies": {}}], "defaultPlan": "free"`,
			[]string{`duplicate key "policies"`}},
		{"duplicate base in a plan", `"plans": [{"id": "free", "policies": {"api": "api-free", "api": "api-gold"}}], "defaultPlan": "free"`,
			[]string{`duplicate key "api"`}},
		{"duplicate plans", `"plans": [], "plans": [{"id": "free", "policies": {}}], "defaultPlan": "free"`,
			[]string{`duplicate key "plans"`}},
		{"wrong case plans", `"Plans": [{"id": "free", "policies": {}}], "defaultPlan": "free"`,
			[]string{`key "Plans" is not "plans" (keys are case-sensitive)`}},
		{"wrong case defaultPlan", `"plans": [{"id": "free", "policies": {}}], "defaultplan": "free"`,
			[]string{`key "defaultplan" is not "defaultPlan" (keys are case-sensitive)`}},
		{"plans not a list", `"plans": {"id": "free"}, "defaultPlan": "free"`,
			[]string{"cannot unmarshal object"}},
		{"a target not a string", `"plans": [{"id": "free", "policies": {"api": 1}}], "defaultPlan": "free"`,
			[]string{"cannot unmarshal number"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set, err := ParsePolicies(strings.NewReader(plansFile(tc.top)))
			require.Error(t, err)
			assert.True(t, set.Plans.IsZero())
			var pfe *PolicyFileError
			require.ErrorAs(t, err, &pfe)
			for _, p := range pfe.Problems {
				assert.ErrorIs(t, p, ErrPolicyFile, "every problem: %v", p)
			}
			for _, c := range tc.contains {
				assert.Contains(t, err.Error(), c)
			}
		})
	}
}

// TestParsePoliciesPlansAfterPolicyProblems: a file whose policies have
// problems reports those, not plan problems that would only repeat them.
func TestParsePoliciesPlansAfterPolicyProblems(t *testing.T) {
	file := strings.Replace(plansFile(`"plans": [{"id": "free", "policies": {"api": "api-free"}}], "defaultPlan": "free"`),
		`"capacity":100`, `"capacity":0`, 1)
	_, err := ParsePolicies(strings.NewReader(file))
	require.ErrorIs(t, err, ErrPolicyFile)
	assert.Contains(t, err.Error(), "policies[0] (api)")
	assert.NotContains(t, err.Error(), "plan")
}

// TestReloadPoliciesCarriesPlans: a reload reads the plans again with the
// policies, and refuses a file whose plans do not pass.
func TestReloadPoliciesCarriesPlans(t *testing.T) {
	path := writeFile(t, "policies.json", plansFile(""))
	cfg, err := Load(with(enabledEnv(), "APP_RATE_LIMIT_POLICIES_FILE", path))
	require.NoError(t, err)
	require.True(t, cfg.RateLimit.Policies.Plans.IsZero())

	require.NoError(t, os.WriteFile(path, []byte(plansFile(issuePlans)), 0o600))
	next, err := ReloadPolicies(cfg)
	require.NoError(t, err)
	plans := next.RateLimit.Policies.Plans
	require.False(t, plans.IsZero())
	assert.Equal(t, ratelimit.PolicyID("api-gold"), plans.Resolve("gold", "api"))
	assert.Equal(t, ratelimit.PlanID("free"), plans.Default())

	require.NoError(t, os.WriteFile(path, []byte(plansFile(`"plans": [{"id": "free", "policies": {"api": "api-free"}}]`)), 0o600))
	_, err = ReloadPolicies(next)
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrPolicyFile)
	assert.Contains(t, err.Error(), "defaultPlan: missing")
	assert.Contains(t, err.Error(), path)

	// Plans removed: the reloaded set has none.
	require.NoError(t, os.WriteFile(path, []byte(plansFile("")), 0o600))
	again, err := ReloadPolicies(next)
	require.NoError(t, err)
	assert.True(t, again.RateLimit.Policies.Plans.IsZero())
}

// TestParsePoliciesPlanKeysAreCaseSensitive: a plan object's keys are
// checked as a policy's are: a key differing from a field only in case,
// and a duplicate key, are refused, naming the plan.
func TestParsePoliciesPlanKeysAreCaseSensitive(t *testing.T) {
	for name, plan := range map[string]string{
		"wrong case": `{"ID": "free", "policies": {}}`,
		"duplicate":  `{"id": "free", "id": "gold", "policies": {}}`,
	} {
		t.Run(name, func(t *testing.T) {
			file := `{"policies": [{"id": "api", "revision": 1, "algorithm": "fixed_window", "limit": 5, "window": "1m", "routes": ["GET /api/"]}], "plans": [` + plan + `], "defaultPlan": "free"}`
			_, err := ParsePolicies(strings.NewReader(file))
			require.Error(t, err)
			require.ErrorIs(t, err, ErrPolicyFile)
			assert.Contains(t, err.Error(), "plans[0]: ")
		})
	}
}
