package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/tech-log/tech-log-backend/shared-contract/keyspace"
)

// PlanID names a plan (a tier such as "free" or "gold") of a policy file.
// It has the PolicyID syntax: it is a metric label value and part of an
// assignment's stored value.
type PlanID string

// Validate reports whether id has the PlanID syntax (PolicyID's).
func (id PlanID) Validate() error {
	if !keyspace.IsSegment(string(id)) {
		return fmt.Errorf("%w: plan id %q must match ^[a-z0-9][a-z0-9._-]{0,63}$", ErrInvalidPlans, bounded(string(id)))
	}
	return nil
}

// MaxPlans bounds the plans of one Plans table: plan IDs are metric label
// values.
const MaxPlans = 64

// Plan is one tier: for each base policy it maps, the policy that decides
// the requests of a subject on this plan (issue 36). A base policy it does
// not map decides as it is.
type Plan struct {
	ID       PlanID
	Policies map[PolicyID]PolicyID
}

// ErrInvalidPlans is wrapped by every NewPlans error.
var ErrInvalidPlans = errors.New("invalid plans")

// PlanSource tells the plan a subject is assigned to. It is the port a
// plan-aware decorator asks; the assignment lives with the coordination
// server and only an operator sets it.
type PlanSource interface {
	// PlanOf returns the plan subject is assigned to, or "" when it has no
	// assignment (it is on the default plan). An error means the
	// assignment is unknown: the caller must not guess a plan that could
	// admit more than the subject's own.
	PlanOf(ctx context.Context, subject SubjectDigest) (PlanID, error)
}

// Plans is the immutable table of a policy file's plans: which policy
// decides a request mapped to a base policy, for a subject on each plan.
// The zero Plans has no plans: every policy decides as it is.
type Plans struct {
	deflt PlanID
	ids   []PlanID
	by    map[PlanID]map[PolicyID]PolicyID
	// family is, per mapped base policy, every policy that decides it on
	// some plan (the base itself when a plan leaves it unmapped), sorted.
	family map[PolicyID][]PolicyID
}

// NewPlans builds the table of plans with defaultPlan as the plan of a
// subject without an assignment. policies are every policy of the file,
// by ID. The rules, each error naming the plan and policy at fault: 1 to
// MaxPlans plans with distinct IDs, defaultPlan among them; every base and
// every mapped policy among policies; a base is never itself a plan's
// target for another base, and a target decides one base only; a base
// has subject scope (a global policy is one budget for everyone, not a
// per-subject tier) and is enforced; a target is like its base in what
// the request path reads before it knows the plan: same scope, enforced,
// a dedup window exactly when the base has one, a queue (a delaying
// algorithm) exactly when the base is one, and it may join a policy set
// exactly when the base may.
func NewPlans(defaultPlan PlanID, plans []Plan, policies map[PolicyID]Policy) (Plans, error) {
	var errs []error
	fail := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidPlans}, args...)...))
	}
	if len(plans) == 0 {
		fail("no plans: give at least one, or leave plans and defaultPlan out")
	}
	if len(plans) > MaxPlans {
		fail("%d plans, at most %d", len(plans), MaxPlans)
	}
	t := Plans{deflt: defaultPlan, by: map[PlanID]map[PolicyID]PolicyID{}, family: map[PolicyID][]PolicyID{}}
	targetOf := map[PolicyID]PolicyID{} // target -> its base
	for i, pl := range plans {
		if !keyspace.IsSegment(string(pl.ID)) {
			fail("plans[%d].id: plan id %q must match ^[a-z0-9][a-z0-9._-]{0,63}$", i, bounded(string(pl.ID)))
			continue
		}
		if _, dup := t.by[pl.ID]; dup {
			fail("plans[%d].id: plan %q is given twice", i, pl.ID)
			continue
		}
		m := make(map[PolicyID]PolicyID, len(pl.Policies))
		for _, base := range sortedKeys(pl.Policies) {
			target := pl.Policies[base]
			where := fmt.Sprintf("plan %q: policies[%q]", pl.ID, base)
			if err := planMapping(base, target, policies); err != nil {
				fail("%s: %v", where, err)
				continue
			}
			if b, ok := targetOf[target]; ok && b != base {
				fail("%s: policy %q already decides base policy %q; a plan's policy decides one base policy", where, target, b)
				continue
			}
			targetOf[target] = base
			m[base] = target
		}
		t.by[pl.ID] = m
		t.ids = append(t.ids, pl.ID)
	}
	bases := t.baseSet()
	for _, target := range sortedKeys(targetOf) {
		if base := targetOf[target]; target != base {
			if _, isBase := bases[target]; isBase {
				fail("policy %q is both a base policy and plan policy of base %q; plans do not chain", target, base)
			}
		}
	}
	if !keyspace.IsSegment(string(defaultPlan)) {
		fail("defaultPlan: plan id %q must match ^[a-z0-9][a-z0-9._-]{0,63}$", bounded(string(defaultPlan)))
	} else if _, ok := t.by[defaultPlan]; !ok && len(plans) > 0 {
		fail("defaultPlan: plan %q is not among plans", defaultPlan)
	}
	if err := errors.Join(errs...); err != nil {
		return Plans{}, err
	}
	for base := range t.baseSet() {
		fam := []PolicyID{}
		for _, id := range t.ids {
			fam = append(fam, t.Resolve(id, base))
		}
		slices.Sort(fam)
		t.family[base] = slices.Compact(fam)
	}
	return t, nil
}

// planMapping checks one mapping base -> target of a plan.
func planMapping(base, target PolicyID, policies map[PolicyID]Policy) error {
	b, ok := policies[base]
	if !ok {
		return fmt.Errorf("base policy %q is not among policies", base)
	}
	p, ok := policies[target]
	if !ok {
		return fmt.Errorf("policy %q is not among policies", target)
	}
	switch {
	case b.Scope() != ScopeSubject:
		return fmt.Errorf("base policy %q has scope %s; a plan sets a subject's own budget, so its base policies have subject scope", base, b.Scope())
	case b.Shadow() || p.Shadow():
		return fmt.Errorf("policies %q and %q must both be enforced; a shadow policy runs beside a route, not for a plan", base, target)
	case p.Scope() != b.Scope():
		return fmt.Errorf("policy %q has scope %s, its base %q has %s", target, p.Scope(), base, b.Scope())
	case (p.DedupWindow() > 0) != (b.DedupWindow() > 0):
		return fmt.Errorf("policy %q and its base %q must both have a dedup window or both have none (the edge reads Idempotency-Key before it knows the plan)", target, base)
	}
	bs, _ := b.Algorithm().Spec()
	ps, _ := p.Algorithm().Spec()
	if bs.Delays != ps.Delays {
		return fmt.Errorf("policy %q and its base %q must both be queues (leaky_bucket) or both not", target, base)
	}
	if bs.Holds != ps.Holds {
		return fmt.Errorf("policy %q and its base %q must both be concurrency limits or both not (the edge gives a held slot back)", target, base)
	}
	if bs.Holds && p.WindowMillis() != b.WindowMillis() {
		return fmt.Errorf("policy %q and its base %q must have the same maxHold (the edge ends a handler's context at its route's)", target, base)
	}
	if (CanJoinSet(b) == nil) != (CanJoinSet(p) == nil) {
		return fmt.Errorf("policy %q and its base %q must both be able to join a policy set or both not", target, base)
	}
	return nil
}

func sortedKeys(m map[PolicyID]PolicyID) []PolicyID {
	keys := make([]PolicyID, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// baseSet is every base policy some plan maps.
func (t Plans) baseSet() map[PolicyID]struct{} {
	s := map[PolicyID]struct{}{}
	for _, m := range t.by {
		for base := range m {
			s[base] = struct{}{}
		}
	}
	return s
}

// IsZero reports whether t has no plans.
func (t Plans) IsZero() bool { return len(t.ids) == 0 }

// Default is the plan of a subject without an assignment.
func (t Plans) Default() PlanID { return t.deflt }

// IDs lists the plans in file order (a copy).
func (t Plans) IDs() []PlanID { return slices.Clone(t.ids) }

// Has reports whether id is one of t's plans.
func (t Plans) Has(id PlanID) bool {
	_, ok := t.by[id]
	return ok
}

// Effective is the plan that decides for a subject assigned to id: id
// itself when t has it, else the default plan (an assignment "" or one
// naming a plan the file no longer has).
func (t Plans) Effective(id PlanID) PlanID {
	if t.Has(id) {
		return id
	}
	return t.deflt
}

// Mapped reports whether some plan maps base: only then does a request
// mapped to base depend on its subject's plan.
func (t Plans) Mapped(base PolicyID) bool {
	_, ok := t.family[base]
	return ok
}

// Resolve is the policy that decides a request mapped to base for a
// subject on plan (Effective(plan)): the plan's policy for base, or base
// itself when the plan does not map it.
func (t Plans) Resolve(plan PlanID, base PolicyID) PolicyID {
	if p, ok := t.by[t.Effective(plan)][base]; ok {
		return p
	}
	return base
}

// Bases lists the base policies some plan maps, sorted.
func (t Plans) Bases() []PolicyID {
	out := make([]PolicyID, 0, len(t.family))
	for b := range t.family {
		out = append(out, b)
	}
	slices.Sort(out)
	return out
}

// Family lists every policy that decides requests mapped to base on some
// plan, sorted; nil when no plan maps base.
func (t Plans) Family(base PolicyID) []PolicyID { return slices.Clone(t.family[base]) }
