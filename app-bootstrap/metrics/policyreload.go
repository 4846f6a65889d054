package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The policy file's reload metrics (docs/operations.md, "Reloading the
// policy file"), named after the RLS's tlb_rls_reloads_total. Labels are
// fixed sets (trigger, result) or the loaded file's policy IDs (at most
// 1024, config's bound).
const (
	// PolicyReloadsTotal counts reloads of APP_RATE_LIMIT_POLICIES_FILE by
	// trigger (file, signal, call) and result (applied, unchanged,
	// refused); the start-up load is not counted.
	PolicyReloadsTotal = "tlb_ratelimit_policy_reloads_total"
	// PolicyRevision is the revision of each policy serving now, by
	// policy; a policy a reload removes loses its series.
	PolicyRevision = "tlb_ratelimit_policy_revision"
	// PolicyLoadedSeconds is the Unix time the serving policy set was
	// loaded: at start, then at every applied reload.
	PolicyLoadedSeconds = "tlb_ratelimit_policy_loaded_timestamp_seconds"
)

// PolicyReload holds the policy reload's collectors, registered in m's
// registry. Most callers want Reload after every attempt and Loaded after
// start and every applied reload. Safe for concurrent use.
type PolicyReload struct {
	reloads  *prometheus.CounterVec
	revision *prometheus.GaugeVec
	loaded   prometheus.Gauge
}

// RegisterPolicyReload registers the policy reload's metrics; call it once.
func (m *Metrics) RegisterPolicyReload() *PolicyReload {
	r := &PolicyReload{
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: PolicyReloadsTotal,
			Help: "Reloads of the policy file (APP_RATE_LIMIT_POLICIES_FILE) by trigger (file, signal, call) and result (applied; unchanged: nothing to apply; refused: the previous policies keep serving).",
		}, []string{"trigger", "result"}),
		revision: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: PolicyRevision,
			Help: "The revision of each policy serving now, by policy ID.",
		}, []string{"policy"}),
		loaded: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: PolicyLoadedSeconds,
			Help: "Unix time the serving policy set was loaded (start-up or the last applied reload).",
		}),
	}
	m.registry.MustRegister(r.reloads, r.revision, r.loaded)
	return r
}

// Reload counts one reload attempt by trigger and result.
func (r *PolicyReload) Reload(trigger, result string) {
	r.reloads.WithLabelValues(trigger, result).Inc()
}

// Loaded records the policy set serving since at: the revision of each
// policy (by ID), replacing the previous set's series.
func (r *PolicyReload) Loaded(revisions map[string]int64, at time.Time) {
	r.revision.Reset()
	for id, rev := range revisions {
		r.revision.WithLabelValues(id).Set(float64(rev))
	}
	r.loaded.Set(float64(at.UnixNano()) / 1e9)
}
