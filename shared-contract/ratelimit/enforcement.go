package ratelimit

import (
	"errors"
	"fmt"
)

// Enforcement says whether a policy's denials are enforced or only counted
// (ADR 0037). Callers that map requests to policies (the HTTP edge, the
// Envoy RLS) read it; providers and decorators ignore it: it changes no
// key, no program and no decision, only what a caller does with one.
// The zero value is invalid for a Policy (Policy.Enforcement answers
// Enforce or Shadow); in a PolicySpec it means Enforce.
type Enforcement int

// The enforcements.
const (
	// Enforce: a denial refuses the request (the default).
	Enforce Enforcement = iota + 1
	// Shadow: the policy is decided and counted (would allow, would deny,
	// undecided) but never refuses a request, never joins a policy set and
	// never writes a response field: a dark launch of a limit. The same
	// meaning as an Envoy RLS rule's shadow_mode.
	Shadow
)

// String returns the policy-file spelling: "enforce" or "shadow".
func (e Enforcement) String() string {
	switch e {
	case Enforce:
		return "enforce"
	case Shadow:
		return "shadow"
	}
	return fmt.Sprintf("Enforcement(%d)", int(e))
}

// ErrInvalidEnforcement is wrapped by ParseEnforcement's error.
var ErrInvalidEnforcement = errors.New("invalid enforcement")

// ParseEnforcement parses the policy-file spelling of an Enforcement:
// "enforce" or "shadow"; anything else is an error wrapping
// ErrInvalidEnforcement.
func ParseEnforcement(s string) (Enforcement, error) {
	switch s {
	case "enforce":
		return Enforce, nil
	case "shadow":
		return Shadow, nil
	}
	return 0, fmt.Errorf("%w: %q is not \"enforce\" or \"shadow\"", ErrInvalidEnforcement, bounded(s))
}
