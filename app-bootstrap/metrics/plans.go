package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// The plans' metrics (issue 36 item 6; docs/operations.md, "Plans").
// Labels are the policy file's plan and policy IDs (bounded by
// ratelimit.MaxPlans and the file's policy bound), fixed result sets, and
// "" for a plan that could not be read.
const (
	// PlanDecisionsTotal counts the requests of base policies some plan
	// maps, by the plan that decided them, the base policy and the result
	// (allowed, denied, unavailable, indeterminate, incompatible).
	PlanDecisionsTotal = "tlb_ratelimit_plan_decisions_total"
	// PlanCacheTotal counts the plan cache's lookups by result (hit, miss,
	// stale, error) and the entries invalidations dropped (invalidated).
	PlanCacheTotal = "tlb_ratelimit_plan_cache_total"
	// CarryTotal counts the checks of a subject's state under a policy
	// whose previous revision this instance served, by policy and result
	// (carried, nothing, error; ADR 0039).
	CarryTotal = "tlb_ratelimit_carry_total"
)

// Plans holds the plans' collectors. Safe for concurrent use.
type Plans struct {
	decisions *prometheus.CounterVec
	cache     *prometheus.CounterVec
	carry     *prometheus.CounterVec
}

// Plans returns the plans' and carry's collectors, registering them at
// the first call: call it only when the policy file has plans or a
// reload changed a revision, so a service without either has no such
// series.
func (m *Metrics) Plans() *Plans {
	m.plansOnce.Do(func() { m.plans = m.registerPlans() })
	return m.plans
}

func (m *Metrics) registerPlans() *Plans {
	p := &Plans{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: PlanDecisionsTotal,
			Help: "Requests of base policies that plans map, by deciding plan (empty: the plan could not be read), base policy and result (allowed, denied, unavailable, indeterminate, incompatible).",
		}, []string{"plan", "policy", "result"}),
		cache: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: PlanCacheTotal,
			Help: "Plan assignment cache lookups by result (hit, miss: read from Redis, stale: an expired entry served because the read failed, error) and entries dropped by a published change (invalidated).",
		}, []string{"result"}),
		carry: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: CarryTotal,
			Help: "First decisions of a subject under a policy whose previous revision this instance served, by policy and result (carried: the new state holds what the old one consumed; nothing: nothing to carry; error: the check failed and the decision went on).",
		}, []string{"policy", "result"}),
	}
	m.registry.MustRegister(p.decisions, p.cache, p.carry)
	return p
}

// Decision counts one request decided under plan for base.
func (p *Plans) Decision(plan ratelimit.PlanID, base ratelimit.PolicyID, out ratelimit.Outcome) {
	var result string
	switch o := out.(type) {
	case ratelimit.Evaluated:
		result = "denied"
		if o.Decision.Allowed {
			result = "allowed"
		}
	case ratelimit.Unavailable:
		result = "unavailable"
	case ratelimit.Indeterminate:
		result = "indeterminate"
	case ratelimit.Incompatible:
		result = "incompatible"
	default: // nil: a broken port
		result = "incompatible"
	}
	p.decisions.WithLabelValues(string(plan), string(base), result).Inc()
}

// Carry counts one carry check of policy by result (ratecarry.Result's
// values).
func (p *Plans) Carry(policy ratelimit.PolicyID, result string) {
	p.carry.WithLabelValues(string(policy), result).Inc()
}

// Cache counts one plan cache event (rateplan.CacheEvent's values).
func (p *Plans) Cache(event string) { p.cache.WithLabelValues(event).Inc() }
