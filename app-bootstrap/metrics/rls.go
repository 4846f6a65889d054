package metrics

import "github.com/prometheus/client_golang/prometheus"

// The Envoy rate-limit service's metrics (docs/rls.md). Labels are bounded
// by the configuration: domain is a configured domain, key a rule's full
// key (or a detailed key while the service's cardinality cap has room),
// result, reason and the reload result fixed sets.
const (
	// RLSDecisionsTotal counts descriptors by domain, rule key and result
	// (ok, over_limit, would_deny, undecided, no_rule, unlimited,
	// check_only, negative_hits, rolled_back).
	RLSDecisionsTotal = "tlb_rls_decisions_total"
	// RLSRefusedTotal counts requests refused before any decision, by
	// reason.
	RLSRefusedTotal = "tlb_rls_refused_total"
	// RLSFoldedTotal counts detailed_metric keys folded into their rule's
	// full key because the cardinality cap was reached, by domain.
	RLSFoldedTotal = "tlb_rls_detailed_folded_total"
	// RLSRefundFailuresTotal counts refunds that did not run (the charge
	// stays), by rule key.
	RLSRefundFailuresTotal = "tlb_rls_refund_failures_total"
	// RLSReloadsTotal counts configuration reloads by result (applied,
	// refused).
	RLSReloadsTotal = "tlb_rls_reloads_total"
	// RLSDenialCacheHitsTotal and the five below are the denial cache's
	// metrics (as DenialCacheHitsTotal and its neighbours) for the rule
	// generations' caches: counters summed over every generation, gauges
	// of the newest.
	RLSDenialCacheHitsTotal          = "tlb_rls_denial_cache_hits_total"
	RLSDenialCacheEntries            = "tlb_rls_denial_cache_entries"
	RLSDenialCacheMaxEntries         = "tlb_rls_denial_cache_max_entries"
	RLSDenialCacheInvalidationsTotal = "tlb_rls_denial_cache_invalidations_total"
	RLSDenialCacheEvictedTotal       = "tlb_rls_denial_cache_evicted_total"
	RLSDenialCacheLive               = "tlb_rls_denial_cache_live"
)

// RLS holds the rate-limit service's collectors, registered in m's
// registry. Safe for concurrent use.
type RLS struct {
	decisions *prometheus.CounterVec
	refused   *prometheus.CounterVec
	folded    *prometheus.CounterVec
	refundErr *prometheus.CounterVec
	reloads   *prometheus.CounterVec
}

// RegisterRLS registers the rate-limit service's metrics; call it once.
func (m *Metrics) RegisterRLS() *RLS {
	r := &RLS{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: RLSDecisionsTotal,
			Help: "Envoy rate-limit service: descriptors decided, by configured domain, rule key and result.",
		}, []string{"domain", "key", "result"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: RLSRefusedTotal,
			Help: "Envoy rate-limit service: requests refused before any decision, by reason.",
		}, []string{"reason"}),
		folded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: RLSFoldedTotal,
			Help: "Envoy rate-limit service: detailed_metric keys counted under their rule's full key because the cardinality cap was reached.",
		}, []string{"domain"}),
		refundErr: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: RLSRefundFailuresTotal,
			Help: "Envoy rate-limit service: refunds of a refused request's admissions that did not run (the charge stays until the window rolls).",
		}, []string{"key"}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: RLSReloadsTotal,
			Help: "Envoy rate-limit service: configuration reloads by result (applied, or refused with the previous configuration serving).",
		}, []string{"result"}),
	}
	m.registry.MustRegister(r.decisions, r.refused, r.folded, r.refundErr, r.reloads)
	return r
}

// Decision counts one descriptor's result.
func (r *RLS) Decision(domain, key, result string) {
	r.decisions.WithLabelValues(domain, key, result).Inc()
}

// Refused counts one request refused before any decision.
func (r *RLS) Refused(reason string) { r.refused.WithLabelValues(reason).Inc() }

// Folded counts one detailed key folded into its rule's full key.
func (r *RLS) Folded(domain string) { r.folded.WithLabelValues(domain).Inc() }

// RefundFailed counts one refund that did not run.
func (r *RLS) RefundFailed(key string) { r.refundErr.WithLabelValues(key).Inc() }

// Reload counts one reload by result ("applied" or "refused").
func (r *RLS) Reload(result string) { r.reloads.WithLabelValues(result).Inc() }
