package config

import (
	_ "embed"
	"fmt"
	"maps"
	"slices"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// plans checks the file's "plans" and "defaultPlan" (ratelimit.NewPlans'
// rules, and: a plan's policy other than its base has no routes of its
// own, since it decides only through its base's) and records them in the
// set. It adds nothing when the policies had problems: a plan's errors
// would only repeat theirs.
func (b *setBuilder) plans(plans []planJSON, defaultPlan *string) {
	if len(plans) == 0 && defaultPlan == nil {
		return
	}
	if len(*b.problems) > 0 {
		return
	}
	if defaultPlan == nil {
		*b.problems = append(*b.problems, fmt.Errorf("%w: defaultPlan: missing; a file with plans names the plan of a subject without an assignment", ErrPolicyFile))
		return
	}
	defs := make([]ratelimit.Plan, 0, len(plans))
	for i, pj := range plans {
		if pj.ID == nil {
			*b.problems = append(*b.problems, fmt.Errorf("%w: plans[%d]: id is missing", ErrPolicyFile, i))
			continue
		}
		m := make(map[ratelimit.PolicyID]ratelimit.PolicyID, len(pj.Policies))
		for _, base := range slices.Sorted(maps.Keys(pj.Policies)) {
			target := pj.Policies[base]
			m[ratelimit.PolicyID(base)] = ratelimit.PolicyID(target)
			if base != target && b.hasRoutes(ratelimit.PolicyID(target)) {
				*b.problems = append(*b.problems, fmt.Errorf("%w: plans[%d] (%s): policies[%q]: policy %q has routes of its own; a plan's policy decides only its base policy's routes (remove its routes)", ErrPolicyFile, i, bounded(*pj.ID), bounded(base), bounded(target)))
			}
		}
		defs = append(defs, ratelimit.Plan{ID: ratelimit.PlanID(*pj.ID), Policies: m})
	}
	if len(*b.problems) > 0 {
		return
	}
	t, err := ratelimit.NewPlans(ratelimit.PlanID(*defaultPlan), defs, b.byID)
	if err != nil {
		for _, e := range unjoin(err) {
			*b.problems = append(*b.problems, fmt.Errorf("%w: %w", ErrPolicyFile, e))
		}
		return
	}
	b.set.Plans = t
}

// hasRoutes reports whether some route names policy id.
func (b *setBuilder) hasRoutes(id ratelimit.PolicyID) bool {
	for _, r := range b.set.Routes {
		if r.Policy == id {
			return true
		}
	}
	return false
}

// unjoin is err's joined errors, or err alone.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}
