package send

import (
	"errors"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// Errors of the send loop the provider maps or branches on.
var (
	// ErrDeadlineTooShort: the caller's remaining deadline is shorter than
	// the command timeout, so the call is not sent.
	ErrDeadlineTooShort = errors.New("remaining deadline shorter than the command timeout")
	// ErrPanic: a send recovered from a panic; nothing is known about the
	// command. It is the contract's ratelimit.ErrPanic.
	ErrPanic = ratelimit.ErrPanic
	// ErrInFlightFull: the target already has its in-flight bound of
	// program calls on the wire; the call is not sent.
	ErrInFlightFull = errors.New("in-flight bound reached")
	// ErrCircuitOpen is the Cause of a call the target's breaker refused:
	// it was neither sent nor given a connection.
	ErrCircuitOpen = errors.New("circuit breaker open: coordination redis unreachable")
	// ErrQualificationRefused marks a qualification error (the qualify
	// function's) with which the server was refused for what it answered
	// (version, script digest, server policy), not for a failure to reach
	// it: the target's breaker counts it as an answer.
	ErrQualificationRefused = errors.New("target refused at qualification")
	// ErrClusterSlotUnserved: the slot map has no primary for the key's slot.
	ErrClusterSlotUnserved = errors.New("no cluster node serves the key's slot")
	// errNoKeys: RunSet was given no key (a caller's bug; nothing sent).
	errNoKeys = errors.New("a set call needs at least one key")
)
