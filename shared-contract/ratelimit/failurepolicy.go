package ratelimit

import (
	"fmt"
)

// FailurePolicy says what a caller does when no decision can be had.
// FailClosed is the default; LocalFallback (opt-in, docs/degraded-mode.md)
// lets an in-process limiter with this instance's share of the limit decide
// while the coordination store is unreachable. FailOpen exists so that a
// configuration asking for it is named and rejected rather than misread. The
// zero value is invalid.
type FailurePolicy int

// The failure policies.
const (
	FailClosed FailurePolicy = iota + 1
	FailOpen
	// LocalFallback: while the store is unreachable (Unavailable, never
	// Indeterminate or Incompatible), decide locally with the limit divided
	// by FallbackInstances; see Policy.FallbackShare.
	LocalFallback
)

// MaxFallbackInstances bounds PolicySpec.FallbackInstances.
const MaxFallbackInstances = 1 << 20

// String returns the wire name: "fail-closed", "fail-open" or
// "local-fallback".
func (f FailurePolicy) String() string {
	switch f {
	case FailClosed:
		return "fail-closed"
	case FailOpen:
		return "fail-open"
	case LocalFallback:
		return "local-fallback"
	}
	return fmt.Sprintf("FailurePolicy(%d)", int(f))
}

// ParseFailurePolicy maps a wire name to a FailurePolicy. It accepts
// "fail-open" so that NewPolicy can reject it with a precise reason.
func ParseFailurePolicy(s string) (FailurePolicy, error) {
	switch s {
	case "fail-closed":
		return FailClosed, nil
	case "fail-open":
		return FailOpen, nil
	case "local-fallback":
		return LocalFallback, nil
	}
	return 0, fmt.Errorf("%w: failure policy %q is not fail-closed or local-fallback", ErrUnsupported, bounded(s))
}
