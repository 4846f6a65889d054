package metrics

import "github.com/prometheus/client_golang/prometheus"

// BreakerTargetState is the circuit breaker of each target of the
// rate-limit provider (the server, or each cluster primary), labelled by
// target (an index, never an address) and state: 1 for the target's
// current state, 0 for the others. BreakerState stays the provider-wide
// view (the worst target).
const BreakerTargetState = "tlb_ratelimit_breaker_target_state"

// TargetBreaker is one target's breaker as read at scrape time.
type TargetBreaker struct {
	// Target is the target's index ("0" for a standalone or Sentinel
	// endpoint).
	Target string
	// State is one of BreakerStates.
	State string
}

// RegisterTargetBreakers exports BreakerTargetState, read at scrape time
// from targets (the targets serving now). Call it once.
func (m *Metrics) RegisterTargetBreakers(targets func() []TargetBreaker) {
	m.registry.MustRegister(&targetBreakers{
		read: targets,
		desc: prometheus.NewDesc(BreakerTargetState,
			"Circuit breaker of each target of the rate-limit provider (the server, or each cluster primary by index): 1 for the target's current state (closed, open, half_open), 0 for the others.",
			[]string{"target", "state"}, nil),
	})
}

// targetBreakers is the collector of BreakerTargetState.
type targetBreakers struct {
	read func() []TargetBreaker
	desc *prometheus.Desc
}

// Describe implements prometheus.Collector.
func (c *targetBreakers) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector.
func (c *targetBreakers) Collect(ch chan<- prometheus.Metric) {
	for _, t := range c.read() {
		for _, s := range BreakerStates {
			v := 0.0
			if t.State == s {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, v, t.Target, s)
		}
	}
}
