package edge

import (
	"time"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// Observation describes one request the middleware handled, for metrics. It
// holds no subject.
type Observation struct {
	// Policy is the policy the request was mapped to.
	Policy ratelimit.PolicyID
	// Kind is the outcome kind, KindUnknown for a nil or foreign outcome,
	// and "" when the port was not called (the identity could not be read).
	Kind ratelimit.OutcomeKind
	// Category is the failed outcome's category ("" for Evaluated).
	Category ratelimit.Category
	// Admitted is true when the next handler ran.
	Admitted bool
	// Status is what the middleware answered (429, 503, 400, 500), or 0
	// when it passed the request on.
	Status int
	// Latency is the time spent in EdgePort.Evaluate (0 if not called).
	Latency time.Duration
}

// Observer receives one Observation per rate-limited request, synchronously,
// before the response is written. Implementations must be safe for concurrent
// use and fast (count, do not block).
type Observer interface {
	Observe(Observation)
}

// ObserverFunc adapts a function to Observer.
type ObserverFunc func(Observation)

// Observe calls f(o).
func (f ObserverFunc) Observe(o Observation) { f(o) }
