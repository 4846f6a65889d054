package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// LeaseUnitsTotal counts the units of leases (ADR 0042) by policy and
// event: reserved (taken by a reservation), local (admitted from a lease
// without a round trip), returned (unspent, given back), not_returned
// (giving back failed: counted until the window ends).
const LeaseUnitsTotal = "tlb_ratelimit_lease_units_total"

// Leases holds the leases' collector. Safe for concurrent use.
type Leases struct {
	units *prometheus.CounterVec
}

// Leases returns the leases' collector, registering it at the first call:
// call it only when a policy has a lease, so a service without one has no
// such series.
func (m *Metrics) Leases() *Leases {
	m.leasesOnce.Do(func() {
		m.leases = &Leases{units: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: LeaseUnitsTotal,
			Help: "Units of leases by policy and event (reserved: taken by a reservation; local: admitted from a lease without a round trip; returned: unspent, given back; not_returned: giving back failed, counted until the window ends).",
		}, []string{"policy", "event"})}
		m.registry.MustRegister(m.leases.units)
	})
	return m.leases
}

// Event counts units of policy's leases for event (ratelease.Event's
// values).
func (l *Leases) Event(policy ratelimit.PolicyID, event string, units int64) {
	if units > 0 {
		l.units.WithLabelValues(string(policy), event).Add(float64(units))
	}
}
