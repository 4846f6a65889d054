package config

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// The policy file's "enforce" field (ADR 0037): "enforce" (the default)
// or "shadow", anything else refused naming the policy and the field.

func TestParsePoliciesEnforce(t *testing.T) {
	for _, tc := range []struct {
		name  string
		field []string
		want  ratelimit.Enforcement
	}{
		{"absent is enforce", nil, ratelimit.Enforce},
		{"enforce", []string{`"enforce":"enforce"`}, ratelimit.Enforce},
		{"shadow", []string{`"enforce":"shadow"`}, ratelimit.Shadow},
		{"null is absent", []string{`"enforce":null`}, ratelimit.Enforce},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set, err := ParsePolicies(strings.NewReader(policyJSONText(replace(fwBase, tc.field...)...)))
			require.NoError(t, err)
			require.Len(t, set.Policies, 1)
			assert.Equal(t, tc.want, set.Policies[0].Enforcement())
		})
	}
}

func TestParsePoliciesEnforceRejections(t *testing.T) {
	for _, tc := range []struct {
		name, field, contains string
	}{
		{"unknown value", `"enforce":"dry-run"`, `policies[0] (login): enforce: invalid enforcement: "dry-run" is not "enforce" or "shadow"`},
		{"wrong case", `"enforce":"Shadow"`, `policies[0] (login): enforce: invalid enforcement: "Shadow"`},
		{"empty", `"enforce":""`, `policies[0] (login): enforce: invalid enforcement: ""`},
		{"a boolean", `"enforce":false`, `cannot unmarshal bool`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParsePolicies(strings.NewReader(policyJSONText(replace(fwBase, tc.field)...)))
			require.Error(t, err)
			assert.ErrorIs(t, err, ErrPolicyFile)
			assert.Contains(t, err.Error(), tc.contains)
		})
	}
	t.Run("wrong key case", func(t *testing.T) {
		_, err := ParsePolicies(strings.NewReader(policyJSONText(replace(fwBase, `"Enforce":"shadow"`)...)))
		require.Error(t, err)
		assert.Contains(t, err.Error(), `key "Enforce" is not "enforce"`)
	})
}

// shadowBeside is a policy file of an enforced policy on the route and
// the shadow policies given (JSON fragments of tbBase) on the same route.
func shadowBeside(shadows ...[]string) string {
	ps := []string{"{" + strings.Join(replace(fwBase, `"routes":["GET /api/v1/search"]`), ",") + "}"}
	for _, s := range shadows {
		ps = append(ps, "{"+strings.Join(replace(s, `"enforce":"shadow"`, `"routes":["GET /api/v1/search"]`), ",")+"}")
	}
	return `{"policies": [` + strings.Join(ps, ",") + `]}`
}

// TestParsePoliciesShadowBesideASet: a shadow policy may name a route an
// enforced policy names without joining a set, so what a set member may
// not be (a queue, a dedup window) it may; the number of shadow policies
// on one route is bounded as a set's members are.
func TestParsePoliciesShadowBesideASet(t *testing.T) {
	leaky := []string{`"id":"queue"`, `"revision":1`, `"algorithm":"leaky_bucket"`, `"rate":10`, `"period":"1s"`,
		`"queueSize":5`, `"maxCost":1`, `"cleanupGrace":"1m"`, `"maxClockRegression":"2s"`, `"failurePolicy":"fail-closed"`}
	dedup := replace(tbBase, `"dedupWindow":"1m"`)
	set, err := ParsePolicies(strings.NewReader(shadowBeside(leaky, dedup)))
	require.NoError(t, err, "a shadow queue and a shadow dedup policy beside an enforced one")
	assert.Equal(t, []Route{
		{Pattern: "GET /api/v1/search", Policy: "login"},
		{Pattern: "GET /api/v1/search", Policy: "queue"},
		{Pattern: "GET /api/v1/search", Policy: "api"},
	}, set.Routes)

	var many [][]string
	for i := range ratelimit.MaxSetMembers + 1 {
		many = append(many, replace(tbBase, `"id":"s`+string(rune('a'+i))+`"`))
	}
	_, err = ParsePolicies(strings.NewReader(shadowBeside(many[:ratelimit.MaxSetMembers]...)))
	require.NoError(t, err, "MaxSetMembers shadow policies on one route")
	_, err = ParsePolicies(strings.NewReader(shadowBeside(many...)))
	require.Error(t, err)
	assert.Contains(t, err.Error(), `policies[9] (si): route "GET /api/v1/search" is already named by 8 shadow policies, at most 8 on one route`)

	// An enforced set member is still checked against the enforced ones
	// only: a shadow dedup policy on the route does not make it refused.
	doc := `{"policies": [{` + strings.Join(replace(dedup, `"enforce":"shadow"`, `"routes":["GET /x"]`), ",") + `},{` +
		strings.Join(replace(fwBase, `"routes":["GET /x"]`), ",") + `}]}`
	_, err = ParsePolicies(strings.NewReader(doc))
	require.NoError(t, err)
}

// TestDefaultPolicyNotShadow: a shadow default policy would leave every
// request no route matches unlimited; it is refused, naming the variable.
func TestDefaultPolicyNotShadow(t *testing.T) {
	file := writeFile(t, "p.json", shadowBeside(tbBase))
	_, err := Load(with(enabledEnv(), "APP_RATE_LIMIT_POLICIES_FILE", file, "APP_RATE_LIMIT_DEFAULT_POLICY", "api"))
	require.Error(t, err)
	var found bool
	for _, ve := range VarErrors(err) {
		if ve.Var == "APP_RATE_LIMIT_DEFAULT_POLICY" {
			found = true
			assert.True(t, errors.Is(ve, ErrInvalid))
			assert.Contains(t, ve.Error(), `"api" is a shadow policy`)
		}
	}
	assert.True(t, found, "%v", err)
	_, err = Load(with(enabledEnv(), "APP_RATE_LIMIT_POLICIES_FILE", file, "APP_RATE_LIMIT_DEFAULT_POLICY", "login"))
	require.NoError(t, err, "the enforced policy as the default")
}
