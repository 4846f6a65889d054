package ratelimit_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// planPolicies is the policy table the plan tests map between: subject,
// enforced fixed windows (api, api-free, api-gold, login, login-gold), a
// global one (backend), a shadow one (shadowy), dedup ones (dedup,
// dedup-gold) and leaky-bucket queues (queue, queue-gold).
func planPolicies(t *testing.T) map[ratelimit.PolicyID]ratelimit.Policy {
	t.Helper()
	fixed := func(id ratelimit.PolicyID, f func(*ratelimit.PolicySpec)) ratelimit.PolicySpec {
		return with(fixedSpec(10, time.Second, 1), func(s *ratelimit.PolicySpec) {
			s.ID = id
			if f != nil {
				f(s)
			}
		})
	}
	queue := func(id ratelimit.PolicyID) ratelimit.PolicySpec {
		return with(baseSpec(ratelimit.AlgorithmLeakyBucket,
			ratelimit.LeakyBucket{Rate: 10, Period: time.Second, QueueSize: 5, MaxDelay: time.Second}, 1),
			func(s *ratelimit.PolicySpec) { s.ID = id })
	}
	dedup := func(s *ratelimit.PolicySpec) { s.DedupWindow = time.Minute }
	specs := []ratelimit.PolicySpec{
		fixed("api", nil), fixed("api-free", nil), fixed("api-gold", nil),
		fixed("login", nil), fixed("login-gold", nil),
		fixed("backend", func(s *ratelimit.PolicySpec) { s.Scope = ratelimit.ScopeGlobal }),
		fixed("shadowy", func(s *ratelimit.PolicySpec) { s.Enforcement = ratelimit.Shadow }),
		fixed("dedup", dedup), fixed("dedup-gold", dedup),
		queue("queue"), queue("queue-gold"),
		with(baseSpec(ratelimit.AlgorithmConcurrency, ratelimit.Concurrency{Limit: 4, MaxHold: time.Second}, 1),
			func(s *ratelimit.PolicySpec) { s.ID = "inflight" }),
		with(baseSpec(ratelimit.AlgorithmConcurrency, ratelimit.Concurrency{Limit: 8, MaxHold: 2 * time.Second}, 1),
			func(s *ratelimit.PolicySpec) { s.ID = "inflight-gold" }),
	}
	out := make(map[ratelimit.PolicyID]ratelimit.Policy, len(specs))
	for _, s := range specs {
		out[s.ID] = mustPolicy(t, s)
	}
	return out
}

// plan is a Plan from alternating base, target IDs.
func plan(id ratelimit.PlanID, baseTarget ...ratelimit.PolicyID) ratelimit.Plan {
	m := map[ratelimit.PolicyID]ratelimit.PolicyID{}
	for i := 0; i+1 < len(baseTarget); i += 2 {
		m[baseTarget[i]] = baseTarget[i+1]
	}
	return ratelimit.Plan{ID: id, Policies: m}
}

// TestNewPlansRefusals: each rule of NewPlans, broken alone, is an error
// wrapping ErrInvalidPlans that names the plan and the policy at fault.
func TestNewPlansRefusals(t *testing.T) {
	policies := planPolicies(t)
	tooMany := make([]ratelimit.Plan, ratelimit.MaxPlans+1)
	for i := range tooMany {
		tooMany[i] = plan(ratelimit.PlanID(fmt.Sprintf("p%d", i)))
	}
	for _, tc := range []struct {
		name     string
		deflt    ratelimit.PlanID
		plans    []ratelimit.Plan
		contains []string
	}{
		{"no plans", "free", nil, []string{"no plans"}},
		{"too many plans", "p0", tooMany, []string{fmt.Sprintf("%d plans, at most %d", ratelimit.MaxPlans+1, ratelimit.MaxPlans)}},
		{"bad plan id", "free", []ratelimit.Plan{plan("free"), plan("Gold")},
			[]string{"plans[1].id", `plan id "Gold" must match`}},
		{"empty plan id", "free", []ratelimit.Plan{plan("free"), plan("")},
			[]string{"plans[1].id", `plan id ""`}},
		{"duplicate plan id", "free", []ratelimit.Plan{plan("free", "api", "api-free"), plan("free", "api", "api-gold")},
			[]string{`plans[1].id: plan "free" is given twice`}},
		{"defaultPlan missing", "", []ratelimit.Plan{plan("free")},
			[]string{"defaultPlan", `plan id ""`}},
		{"defaultPlan unknown", "silver", []ratelimit.Plan{plan("free"), plan("gold")},
			[]string{`defaultPlan: plan "silver" is not among plans`}},
		{"base not among policies", "free", []ratelimit.Plan{plan("free", "nope", "api-free")},
			[]string{`plan "free": policies["nope"]`, `base policy "nope" is not among policies`}},
		{"target not among policies", "free", []ratelimit.Plan{plan("free"), plan("gold", "api", "api-platinum")},
			[]string{`plan "gold": policies["api"]`, `policy "api-platinum" is not among policies`}},
		{"global base", "free", []ratelimit.Plan{plan("free", "backend", "api-free")},
			[]string{`plan "free": policies["backend"]`, `base policy "backend" has scope global`}},
		{"global base mapped to itself", "free", []ratelimit.Plan{plan("free", "backend", "backend")},
			[]string{`plan "free": policies["backend"]`, `base policy "backend" has scope global`}},
		{"shadow base", "free", []ratelimit.Plan{plan("free", "shadowy", "api-free")},
			[]string{`plan "free": policies["shadowy"]`, `"shadowy"`, "must both be enforced"}},
		{"shadow target", "free", []ratelimit.Plan{plan("free", "api", "shadowy")},
			[]string{`plan "free": policies["api"]`, `"shadowy"`, "must both be enforced"}},
		{"scope mismatch", "free", []ratelimit.Plan{plan("free", "api", "backend")},
			[]string{`plan "free": policies["api"]`, `policy "backend" has scope global, its base "api" has subject`}},
		{"dedup target, base without", "free", []ratelimit.Plan{plan("free", "api", "dedup")},
			[]string{`plan "free": policies["api"]`, `policy "dedup" and its base "api" must both have a dedup window`}},
		{"dedup base, target without", "free", []ratelimit.Plan{plan("free", "dedup", "api-free")},
			[]string{`plan "free": policies["dedup"]`, `policy "api-free" and its base "dedup" must both have a dedup window`}},
		{"queue base, target not a queue", "free", []ratelimit.Plan{plan("free", "queue", "api-free")},
			[]string{`plan "free": policies["queue"]`, `policy "api-free" and its base "queue" must both be queues (leaky_bucket)`}},
		{"queue target, base not a queue", "free", []ratelimit.Plan{plan("free", "api", "queue-gold")},
			[]string{`plan "free": policies["api"]`, `policy "queue-gold" and its base "api" must both be queues`}},
		{"concurrency base, target a rate limit", "free", []ratelimit.Plan{plan("free", "inflight", "api-free")},
			[]string{`plan "free": policies["inflight"]`, `policy "api-free" and its base "inflight" must both be concurrency limits`}},
		{"concurrency limits of another maxHold", "free", []ratelimit.Plan{plan("free", "inflight", "inflight-gold")},
			[]string{`plan "free": policies["inflight"]`, `policy "inflight-gold" and its base "inflight" must have the same maxHold`}},
		{"one target for two bases in a plan", "free", []ratelimit.Plan{plan("free", "api", "api-free", "login", "api-free")},
			[]string{`plan "free": policies["login"]`, `policy "api-free" already decides base policy "api"`}},
		{"one target for two bases across plans", "free", []ratelimit.Plan{plan("free", "api", "api-gold"), plan("gold", "login", "api-gold")},
			[]string{`plan "gold": policies["login"]`, `policy "api-gold" already decides base policy "api"`}},
		{"a base mapped to itself and another base's target", "free", []ratelimit.Plan{plan("free", "api", "login"), plan("gold", "login", "login")},
			[]string{`plan "gold": policies["login"]`, `policy "login" already decides base policy "api"`}},
		{"a target that is a base in another plan", "free", []ratelimit.Plan{plan("free", "api", "login"), plan("gold", "login", "login-gold")},
			[]string{`policy "login" is both a base policy and plan policy of base "api"`, "plans do not chain"}},
		{"chain across plans", "free", []ratelimit.Plan{plan("free", "api", "api-free"), plan("gold", "api-free", "api-gold")},
			[]string{`policy "api-free" is both a base policy and plan policy of base "api"`, "plans do not chain"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ratelimit.NewPlans(tc.deflt, tc.plans, policies)
			require.Error(t, err)
			assert.ErrorIs(t, err, ratelimit.ErrInvalidPlans)
			for _, c := range tc.contains {
				assert.Contains(t, err.Error(), c)
			}
			assert.True(t, got.IsZero(), "a refused table is the zero Plans")
		})
	}
}

// TestNewPlansSetJoinability: a target's ability to join a policy set
// must match its base's. Every way CanJoinSet can refuse a policy (a dedup
// window, a queue, shadow) has its own earlier rule, so each mismatch is
// reported by that rule; a plan between set-joinable policies passes.
func TestNewPlansSetJoinability(t *testing.T) {
	policies := planPolicies(t)
	for _, pair := range [][2]ratelimit.PolicyID{{"api", "dedup"}, {"api", "queue-gold"}, {"api", "shadowy"}} {
		base, target := policies[pair[0]], policies[pair[1]]
		require.NoError(t, ratelimit.CanJoinSet(base))
		require.Error(t, ratelimit.CanJoinSet(target), "%s cannot join a set", pair[1])
		_, err := ratelimit.NewPlans("free", []ratelimit.Plan{plan("free", pair[0], pair[1])}, policies)
		require.ErrorIs(t, err, ratelimit.ErrInvalidPlans, "%s -> %s", pair[0], pair[1])
		assert.Contains(t, err.Error(), fmt.Sprintf(`policies[%q]`, pair[0]))
	}
	// Both unable to join, for the same reasons: accepted.
	_, err := ratelimit.NewPlans("free", []ratelimit.Plan{plan("free", "dedup", "dedup-gold", "queue", "queue-gold")}, policies)
	require.NoError(t, err)
}

// TestNewPlansListsEveryProblem: the problems are joined, not the first.
func TestNewPlansListsEveryProblem(t *testing.T) {
	_, err := ratelimit.NewPlans("silver", []ratelimit.Plan{
		plan("free", "backend", "api-free"),
		plan("Gold"),
		plan("gold", "api", "queue-gold"),
	}, planPolicies(t))
	require.ErrorIs(t, err, ratelimit.ErrInvalidPlans)
	for _, c := range []string{`policies["backend"]`, "plans[1].id", `plan "gold": policies["api"]`, `defaultPlan: plan "silver"`} {
		assert.Contains(t, err.Error(), c)
	}
	var joined interface{ Unwrap() []error }
	require.True(t, errors.As(err, &joined))
	assert.Len(t, joined.Unwrap(), 4)
	for _, e := range joined.Unwrap() {
		assert.ErrorIs(t, e, ratelimit.ErrInvalidPlans, "each problem wraps the sentinel: %v", e)
	}
}

// TestNewPlansAccepts: the edges that are allowed.
func TestNewPlansAccepts(t *testing.T) {
	policies := planPolicies(t)
	maxPlans := make([]ratelimit.Plan, ratelimit.MaxPlans)
	for i := range maxPlans {
		maxPlans[i] = plan(ratelimit.PlanID(fmt.Sprintf("p%d", i)), "api", "api-free")
	}
	for _, tc := range []struct {
		name  string
		deflt ratelimit.PlanID
		plans []ratelimit.Plan
	}{
		{"MaxPlans plans sharing a target for one base", "p63", maxPlans},
		{"a plan mapping nothing", "free", []ratelimit.Plan{plan("free")}},
		{"a base mapped to itself", "free", []ratelimit.Plan{plan("free", "api", "api"), plan("gold", "api", "api-gold")}},
		{"two bases, each its own targets", "free", []ratelimit.Plan{
			plan("free", "api", "api-free"), plan("gold", "api", "api-gold", "login", "login-gold"),
		}},
		{"dedup base and target", "free", []ratelimit.Plan{plan("free", "dedup", "dedup-gold")}},
		{"queue base and target", "free", []ratelimit.Plan{plan("free", "queue", "queue-gold")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ratelimit.NewPlans(tc.deflt, tc.plans, policies)
			require.NoError(t, err)
			assert.False(t, got.IsZero())
			assert.Equal(t, tc.deflt, got.Default())
		})
	}
}

// TestPlansResolve: which policy decides, per plan and base.
func TestPlansResolve(t *testing.T) {
	// gold is first in the file, the default is free; gold maps login to
	// itself, free leaves it unmapped.
	plans, err := ratelimit.NewPlans("free", []ratelimit.Plan{
		plan("gold", "api", "api-gold", "login", "login"),
		plan("free", "api", "api-free"),
	}, planPolicies(t))
	require.NoError(t, err)

	for _, tc := range []struct {
		plan ratelimit.PlanID
		base ratelimit.PolicyID
		want ratelimit.PolicyID
	}{
		{"gold", "api", "api-gold"},
		{"free", "api", "api-free"},
		{"", "api", "api-free"},         // no assignment: the default plan
		{"platinum", "api", "api-free"}, // a plan the file no longer has: the default plan
		{"gold", "login", "login"},      // mapped to itself
		{"free", "login", "login"},      // unmapped: the base decides
		{"gold", "dedup", "dedup"},      // a base no plan maps
		{"gold", "unknown", "unknown"},  // not even a policy: itself
	} {
		assert.Equal(t, tc.want, plans.Resolve(tc.plan, tc.base), "Resolve(%q, %q)", tc.plan, tc.base)
	}

	assert.Equal(t, ratelimit.PlanID("gold"), plans.Effective("gold"))
	assert.Equal(t, ratelimit.PlanID("free"), plans.Effective("free"))
	assert.Equal(t, ratelimit.PlanID("free"), plans.Effective(""))
	assert.Equal(t, ratelimit.PlanID("free"), plans.Effective("platinum"))
	assert.Equal(t, ratelimit.PlanID("free"), plans.Default())
	assert.True(t, plans.Has("gold"))
	assert.False(t, plans.Has("platinum"))
	assert.False(t, plans.Has(""))

	assert.True(t, plans.Mapped("api"))
	assert.True(t, plans.Mapped("login"), "a base one plan maps to itself is mapped")
	assert.False(t, plans.Mapped("api-gold"), "a target is not a base")
	assert.False(t, plans.Mapped("dedup"))

	assert.Equal(t, []ratelimit.PlanID{"gold", "free"}, plans.IDs(), "file order")
	assert.Equal(t, []ratelimit.PolicyID{"api", "login"}, plans.Bases(), "sorted")
	assert.Equal(t, []ratelimit.PolicyID{"api-free", "api-gold"}, plans.Family("api"), "sorted, whatever the plan order")
	assert.Equal(t, []ratelimit.PolicyID{"login"}, plans.Family("login"), "deduplicated: unmapped and mapped to itself")
	assert.Nil(t, plans.Family("dedup"))
	assert.Nil(t, plans.Family("api-gold"))
}

// TestPlansFamilyIncludesAnUnmappedBase: a plan that leaves a base
// unmapped adds the base itself to its family.
func TestPlansFamilyIncludesAnUnmappedBase(t *testing.T) {
	plans, err := ratelimit.NewPlans("free", []ratelimit.Plan{
		plan("free"),
		plan("silver", "api", "api-gold"),
		plan("gold", "api", "api-gold"),
		plan("bronze", "api", "api-free"),
	}, planPolicies(t))
	require.NoError(t, err)
	assert.Equal(t, []ratelimit.PolicyID{"api", "api-free", "api-gold"}, plans.Family("api"))
	assert.Equal(t, ratelimit.PolicyID("api"), plans.Resolve("free", "api"))
	assert.Equal(t, ratelimit.PolicyID("api"), plans.Resolve("", "api"))
}

// TestPlansImmutable: neither the input nor a returned slice changes the
// table.
func TestPlansImmutable(t *testing.T) {
	gold := plan("gold", "api", "api-gold")
	plans, err := ratelimit.NewPlans("gold", []ratelimit.Plan{gold, plan("free", "api", "api-free")}, planPolicies(t))
	require.NoError(t, err)

	gold.Policies["api"] = "api-free"
	gold.Policies["login"] = "login-gold"
	assert.Equal(t, ratelimit.PolicyID("api-gold"), plans.Resolve("gold", "api"))
	assert.False(t, plans.Mapped("login"))

	ids := plans.IDs()
	ids[0] = "changed"
	assert.Equal(t, []ratelimit.PlanID{"gold", "free"}, plans.IDs())
	fam := plans.Family("api")
	fam[0] = "changed"
	assert.Equal(t, []ratelimit.PolicyID{"api-free", "api-gold"}, plans.Family("api"))
}

// TestPlansZero: the zero Plans has no plans; every policy decides as it
// is.
func TestPlansZero(t *testing.T) {
	var plans ratelimit.Plans
	assert.True(t, plans.IsZero())
	assert.Equal(t, ratelimit.PlanID(""), plans.Default())
	assert.Empty(t, plans.IDs())
	assert.Empty(t, plans.Bases())
	assert.False(t, plans.Has("free"))
	assert.False(t, plans.Mapped("api"))
	assert.Nil(t, plans.Family("api"))
	assert.Equal(t, ratelimit.PolicyID("api"), plans.Resolve("gold", "api"))
	assert.Equal(t, ratelimit.PlanID(""), plans.Effective("gold"))
}

// TestPlanIDValidate: a plan ID has the PolicyID syntax.
func TestPlanIDValidate(t *testing.T) {
	for _, ok := range []ratelimit.PlanID{"free", "gold-2", "a.b_c", "0"} {
		assert.NoError(t, ok.Validate(), ok)
	}
	for _, bad := range []ratelimit.PlanID{"", "Gold", "-free", "free plan", ratelimit.PlanID(fmt.Sprintf("%065d", 0))} {
		assert.ErrorIs(t, bad.Validate(), ratelimit.ErrInvalidPlans, bad)
	}
}
