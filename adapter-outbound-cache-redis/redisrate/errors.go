package redisrate

import (
	"errors"
	"fmt"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/internal/certainty"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/internal/send"
)

// Errors callers branch on: Start, Ready and New return them (outcome
// causes may wrap them too). Everything else about an outcome is its
// ratelimit.Category.
var (
	// ErrClosed: the provider has been closed.
	ErrClosed = errors.New("rate-limit provider is closed")
	// ErrServerVersion: the server is older than a program's
	// MinRedisVersion, or its version could not be read.
	ErrServerVersion = errors.New("redis server version below the programs' minimum")
	// ErrScriptDigest: SCRIPT LOAD answered a digest other than the
	// manifest's: the server does not hash the embedded source as expected.
	ErrScriptDigest = errors.New("script digest differs from the manifest")
	// ErrReplicationShortfall: an ALLOWED reply was acknowledged by fewer
	// replicas than Options.ReplicationAcks (the cause of
	// Indeterminate{replication}).
	ErrReplicationShortfall = errors.New("replication acknowledgement shortfall")
	// ErrUnsupportedClient: New was given a client type R1 does not qualify.
	ErrUnsupportedClient = errors.New("unsupported redis client")
)

// Causes of outcomes whose Category already says what happened.
var (
	// errUnknownPolicy: the request names a policy the provider lacks.
	errUnknownPolicy = errors.New("unknown rate-limit policy")
	// errDeadlineTooShort: the caller's remaining deadline is shorter than
	// the command timeout, so the call is not sent (the send loop's too).
	errDeadlineTooShort = send.ErrDeadlineTooShort
	// errInFlightFull: the target's in-flight bound is reached.
	errInFlightFull = send.ErrInFlightFull
	// errNilContext: Evaluate was called with a nil context.
	errNilContext = errors.New("nil context")
	// errDedupConflict: the dedup program answered DEDUP_CONFLICT.
	errDedupConflict = errors.New("program answered DEDUP_CONFLICT: evaluation id recorded for another cost or policy")
	// errReplayUnreplicated: a replayed decision while replication acks
	// are required; WAIT cannot vouch for the recorded write.
	errReplayUnreplicated = errors.New("replayed decision: its replication is unknown")
	// errPanic: Evaluate (or a batch) recovered from a panic.
	errPanic = send.ErrPanic
	// errClockUnsafe, errStateIncompatible and errInvalidArguments are the
	// causes of the outcomes for the program statuses of the same names.
	errClockUnsafe       = errors.New("program answered CLOCK_UNSAFE")
	errStateIncompatible = errors.New("program answered STATE_INCOMPATIBLE")
	errInvalidArguments  = errors.New("program answered INVALID")
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

// ServerRefusalReason is the readiness reason of a server refusal err
// wraps: "auth" for NOAUTH, WRONGPASS and NOPERM, "loading" for LOADING,
// and "" for anything else (recognised through go-redis's predicates).
func ServerRefusalReason(err error) string { return certainty.ReadinessReason(err) }
