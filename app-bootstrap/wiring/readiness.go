package wiring

import (
	"context"
	"errors"
	"fmt"
)

// ReadinessCheck is one dependency the service needs to serve. Modules
// contribute them to the "readiness" value group; /readyz runs them all.
type ReadinessCheck struct {
	// Name identifies the dependency in logs and in the /readyz detail
	// (a fixed word such as "ratelimit", never an address).
	Name string
	// Check returns nil when the dependency can serve; it must honour ctx.
	Check func(context.Context) error
	// Server, optional, describes the dependency's server as last checked
	// (the /readyz detail); false when nothing was read yet.
	Server func() (ServerDetail, bool)
	// Breakers, optional, is the circuit breaker of each target the
	// dependency sends to (the server, or each cluster primary), for the
	// /readyz detail.
	Breakers func() []BreakerDetail
}

// readiness runs every check; it is ready when all are.
type readiness []ReadinessCheck

// Ready implements the web adapter's readiness interface.
func (r readiness) Ready(ctx context.Context) error {
	var errs []error
	for _, c := range r {
		if err := c.Check(ctx); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", c.Name, err))
		}
	}
	return errors.Join(errs...)
}
