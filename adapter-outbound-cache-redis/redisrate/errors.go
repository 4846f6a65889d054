package redisrate

import (
	"errors"
	"fmt"
)

// Errors of the Provider. Outcome causes wrap them; Start, Ready and New
// return them.
var (
	// ErrClosed: the provider has been closed.
	ErrClosed = errors.New("rate-limit provider is closed")
	// ErrServerVersion: the server is older than a program's
	// MinRedisVersion, or its version could not be read.
	ErrServerVersion = errors.New("redis server version below the programs' minimum")
	// ErrScriptDigest: SCRIPT LOAD answered a digest other than the
	// manifest's: the server does not hash the embedded source as expected.
	ErrScriptDigest = errors.New("script digest differs from the manifest")
	// ErrUnknownPolicy: the request names a policy the provider lacks.
	ErrUnknownPolicy = errors.New("unknown rate-limit policy")
	// ErrDeadlineTooShort: the caller's remaining deadline is shorter than
	// the command timeout, so the call is not sent.
	ErrDeadlineTooShort = errors.New("remaining deadline shorter than the command timeout")
	// ErrInFlightFull: MaxInFlight calls are already in flight.
	ErrInFlightFull = errors.New("in-flight bound reached")
	// ErrNilContext: Evaluate was called with a nil context.
	ErrNilContext = errors.New("nil context")
	// ErrPanic: Evaluate recovered from a panic.
	ErrPanic = errors.New("panic while evaluating")
	// ErrClockUnsafe, ErrStateIncompatible and ErrInvalidArguments are the
	// causes of the outcomes for the program statuses of the same names.
	ErrClockUnsafe       = errors.New("program answered CLOCK_UNSAFE")
	ErrStateIncompatible = errors.New("program answered STATE_INCOMPATIBLE")
	ErrInvalidArguments  = errors.New("program answered INVALID")
	// ErrReplicationShortfall: an ALLOWED reply was acknowledged by fewer
	// replicas than Options.ReplicationAcks (the cause of
	// Indeterminate{replication}).
	ErrReplicationShortfall = errors.New("replication acknowledgement shortfall")
	// ErrUnsupportedClient: New was given a client type R1 does not qualify.
	ErrUnsupportedClient = errors.New("unsupported redis client")
)

// CallError is the Cause of an outcome produced by a failed program call. It
// says which command failed and whether go-redis had begun writing it.
type CallError struct {
	// Command is "evalsha" or "eval".
	Command string
	// Program is the program name, e.g. "rate-fixed-window-v1".
	Program string
	// Written is true once the command may have left the process.
	Written bool
	// Err is the go-redis error.
	Err error
}

func (e *CallError) Error() string {
	return fmt.Sprintf("redisrate: %s %s (written=%t): %v", e.Command, e.Program, e.Written, e.Err)
}

// Unwrap exposes the go-redis error.
func (e *CallError) Unwrap() error { return e.Err }

// maxCauseString bounds server-supplied text (a version, a digest, a panic
// value) quoted in an error.
const maxCauseString = 32

// truncate cuts s to maxCauseString bytes for an error message.
func truncate(s string) string {
	if len(s) > maxCauseString {
		return s[:maxCauseString] + "..."
	}
	return s
}
