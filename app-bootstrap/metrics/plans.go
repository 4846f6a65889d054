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
)

// Plans holds the plans' collectors. Safe for concurrent use.
type Plans struct {
	decisions *prometheus.CounterVec
	cache     *prometheus.CounterVec
}

// Plans returns the plans' collectors, registering them at the first
// call: call it only when the policy file has plans, so a service without
// plans has no such series.
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
	}
	m.registry.MustRegister(p.decisions, p.cache)
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

// Cache counts one plan cache event (rateplan.CacheEvent's values).
func (p *Plans) Cache(event string) { p.cache.WithLabelValues(event).Inc() }
