package redisclient

import (
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// Limits are what a caller checks a client's options against, beside the
// profile's own settings.
type Limits struct {
	// CommandTimeout must equal the client's read and write timeouts.
	CommandTimeout time.Duration
	// MaxInFlight is the caller's own bound on concurrent commands:
	// PoolSize must be at least it.
	MaxInFlight int
}

// CheckClient verifies the options of a client handed to the capability (as
// go-redis normalized them): everything Universal fixes that a command's
// certainty depends on — no retries, one dial attempt, the profile's
// ContextTimeoutEnabled, timeouts per l, a pool no smaller than
// l.MaxInFlight, no client-side caching, no maintenance notifications, no
// limiter. Every violation is one error naming the option and wrapping the
// profile's Invalid error.
func (p Profile) CheckClient(o *redis.Options, l Limits) error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: client "+format, append([]any{p.invalid()}, args...)...))
	}
	if o.MaxRetries != 0 { // go-redis normalizes -1 to 0 and 0 to 3
		bad("MaxRetries allows %d retries: set -1 (a retry after a write could apply a command twice)", o.MaxRetries)
	}
	if o.DialerRetries != dialAttempts {
		bad("DialerRetries %d: set %d", o.DialerRetries, dialAttempts)
	}
	if o.ContextTimeoutEnabled != p.ContextDeadline {
		bad("ContextTimeoutEnabled must be %t (whether the caller's deadline bounds a command is the capability's choice)", p.ContextDeadline)
	}
	if o.ReadTimeout != l.CommandTimeout || o.WriteTimeout != l.CommandTimeout {
		bad("ReadTimeout %v and WriteTimeout %v must equal CommandTimeout %v", o.ReadTimeout, o.WriteTimeout, l.CommandTimeout)
	}
	if p.WaitsWithinCommand {
		if o.DialTimeout > l.CommandTimeout {
			bad("DialTimeout %v exceeds CommandTimeout %v", o.DialTimeout, l.CommandTimeout)
		}
		if o.PoolTimeout > l.CommandTimeout {
			bad("PoolTimeout %v exceeds CommandTimeout %v", o.PoolTimeout, l.CommandTimeout)
		}
	}
	if l.MaxInFlight > o.PoolSize {
		bad("PoolSize %d is below MaxInFlight %d", o.PoolSize, l.MaxInFlight)
	}
	if o.ClientSideCache != nil || o.ClientSideCacheConfig != nil {
		bad("client-side caching must be off")
	}
	if o.MaintNotificationsConfig == nil || o.MaintNotificationsConfig.Mode != maintnotifications.ModeDisabled {
		bad("maintenance notifications must be disabled")
	}
	if o.Limiter != nil {
		bad("Limiter must be nil (the caller bounds its commands itself)")
	}
	return errors.Join(errs...)
}

// CheckCluster verifies a ClusterClient's options: no redirects or retries
// of its own, primaries only, seed addresses, a NewClient hook (as
// NewClusterClient sets), and node clients (probed through the hook,
// without I/O) that pass CheckClient.
func (p Profile) CheckCluster(o *redis.ClusterOptions, l Limits) error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: cluster client "+format, append([]any{p.invalid()}, args...)...))
	}
	if o.MaxRedirects != 0 { // go-redis normalizes -1 to 0 and 0 to 3
		bad("MaxRedirects allows %d redirects or retries: set -1 (a retry after a write could apply a command twice)", o.MaxRedirects)
	}
	if o.ReadOnly || o.RouteByLatency || o.RouteRandomly {
		bad("must route to primaries only (ReadOnly, RouteByLatency and RouteRandomly off)")
	}
	if len(o.Addrs) == 0 {
		bad("has no seed Addrs")
	}
	if o.NewClient == nil {
		bad("has no NewClient hook (build it with NewClusterClient)")
	} else if len(o.Addrs) > 0 {
		probe := o.NewClient(&redis.Options{Addr: o.Addrs[0]})
		if err := p.CheckClient(probe.Options(), l); err != nil {
			errs = append(errs, fmt.Errorf("cluster node client: %w", err))
		}
		_ = probe.Close()
	}
	return errors.Join(errs...)
}
