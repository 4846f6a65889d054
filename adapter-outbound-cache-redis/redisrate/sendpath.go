package redisrate

import (
	"errors"
	"fmt"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/internal/send"
)

// The send path's public names: the send loop, its targets and their
// breakers live in internal/send; these are the provider's interface to
// them.

// BreakerOptions configures the circuit breaker of every target (the
// server, or each cluster primary). The zero value turns breakers off.
type BreakerOptions = send.BreakerOptions

// BreakerState is the state of a circuit breaker, as reported by
// Provider.BreakerState and BreakerTargets. The values are stable: metrics
// and readiness use them.
type BreakerState = send.BreakerState

// TargetBreaker is the circuit breaker of one target, by index and slot
// ranges, never by address.
type TargetBreaker = send.TargetBreaker

// The breaker states.
const (
	BreakerDisabled = send.BreakerDisabled
	BreakerClosed   = send.BreakerClosed
	BreakerOpen     = send.BreakerOpen
	BreakerHalfOpen = send.BreakerHalfOpen
)

// Bounds of BreakerOptions and of the refusals one call follows.
const (
	MaxBreakerThreshold = send.MaxBreakerThreshold
	MinProbeInterval    = send.MinProbeInterval
	MaxProbeInterval    = send.MaxProbeInterval
	MaxClusterHops      = send.MaxClusterHops
)

var (
	// ErrCircuitOpen is the Cause of Unavailable{circuit_open}: the
	// target's breaker is open, so the call was neither sent nor given a
	// connection.
	ErrCircuitOpen = send.ErrCircuitOpen
	// ErrClusterSlotUnserved: the slot map has no primary for the key's
	// slot.
	ErrClusterSlotUnserved = send.ErrClusterSlotUnserved
)

// validateBreaker reports an invalid field of o, naming it.
func validateBreaker(o BreakerOptions) error {
	var errs []error
	if o.Threshold < 0 || o.Threshold > MaxBreakerThreshold {
		errs = append(errs, fmt.Errorf("%w: Options.Breaker.Threshold %d must be in 0..%d", ErrInvalidConfig, o.Threshold, MaxBreakerThreshold))
	}
	if o.Threshold > 0 && (o.ProbeInterval < MinProbeInterval || o.ProbeInterval > MaxProbeInterval) {
		errs = append(errs, fmt.Errorf("%w: Options.Breaker.ProbeInterval %v must be in %v..%v", ErrInvalidConfig, o.ProbeInterval, MinProbeInterval, MaxProbeInterval))
	}
	return errors.Join(errs...)
}

// PipelineStats counts the pipelined program calls of a Provider
// (Options.PipelineMaxBatch): batches written, the calls in them (a call
// sent alone is in neither), and the calls queued right now.
type PipelineStats struct {
	Batches int64
	Calls   int64
	Queued  int
}

// PipelineStats returns the provider's batching counters, summed over its
// targets serving now (the server, or the cluster's primaries); zero with
// batching off.
func (p *Provider) PipelineStats() PipelineStats {
	b, c, q := p.exec.PipelineStats()
	return PipelineStats{Batches: b, Calls: c, Queued: q}
}

// BreakerState reports the provider's circuit breaker state: the worst
// over the targets serving now (open, then half_open, then closed), so a
// standalone or Sentinel endpoint reports its one breaker;
// BreakerDisabled without breakers.
func (p *Provider) BreakerState() BreakerState { return p.exec.BreakerState() }

// BreakerTargets reports the breaker of every target serving now (the
// server, or the primaries of the slot map), in target order; empty
// without breakers.
func (p *Provider) BreakerTargets() []TargetBreaker { return p.exec.BreakerTargets() }

// BreakerTrips reports how many times a target's breaker has opened since
// New, summed over every target met.
func (p *Provider) BreakerTrips() uint64 { return p.exec.BreakerTrips() }

// OnBreakerChange registers f (in addition to any registered before) to be
// told every change of a target's breaker (open, closed); call it before
// serving. It is called synchronously on the goroutine that changed the
// state and must not block or call the provider.
func (p *Provider) OnBreakerChange(f func(BreakerState)) { p.exec.OnBreakerChange(f) }
