package ratelimit

// Category is a stable, low-cardinality reason attached to a failed outcome.
// The values are used as metric labels and in problem responses.
type Category string

// Unavailable categories: known no mutation.
const (
	// CategoryInvalidRequest: the request failed validation; nothing sent.
	CategoryInvalidRequest Category = "invalid_request"
	// CategoryUnknownPolicy: the provider has no policy with that ID.
	CategoryUnknownPolicy Category = "unknown_policy"
	// CategoryDeadline: the remaining caller deadline is shorter than the
	// fixed command timeout (admission precheck); nothing sent.
	CategoryDeadline Category = "deadline"
	// CategoryAdmission: the in-flight bound or the connection pool is full.
	CategoryAdmission Category = "admission"
	// CategoryConnection: no connection could be had; nothing written.
	CategoryConnection Category = "connection"
	// CategoryServerRejected: the server refused before running the program
	// (NOPERM, OOM, READONLY, LOADING, BUSY, MASTERDOWN, ...).
	CategoryServerRejected Category = "server_rejected"
	// CategoryClockUnsafe: server time went back further than the policy
	// tolerates; nothing written.
	CategoryClockUnsafe Category = "clock_unsafe"
	// CategoryClosed: the provider has been closed.
	CategoryClosed Category = "closed"
	// CategoryCircuitOpen: the provider's circuit breaker is open after a
	// run of connection failures or timeouts; nothing was sent and no
	// connection was attempted (docs/degraded-mode.md).
	CategoryCircuitOpen Category = "circuit_open"
)

// Indeterminate categories: the command may have run.
const (
	// CategoryTimeout: no reply within the command timeout after sending.
	CategoryTimeout Category = "timeout"
	// CategoryConnectionLost: the connection failed after sending.
	CategoryConnectionLost Category = "connection_lost"
	// CategoryCancelled: the caller's context ended after sending.
	CategoryCancelled Category = "cancelled"
	// CategoryReplication: the program ran and admitted, but fewer replicas
	// than required acknowledged the write (opt-in replication acks, WAIT)
	// before the ack timeout. The request is not admitted; the consumption
	// stays counted (erring toward admitting less).
	CategoryReplication Category = "replication"
)

// Incompatible categories.
const (
	// CategoryStateIncompatible: stored state has another type, schema,
	// algorithm or revision.
	CategoryStateIncompatible Category = "state_incompatible"
	// CategoryInvalidArguments: the program answered INVALID.
	CategoryInvalidArguments Category = "invalid_arguments"
	// CategoryMalformedReply: the reply did not have the exact expected shape.
	CategoryMalformedReply Category = "malformed_reply"
	// CategoryProgramFault: the program raised a runtime error.
	CategoryProgramFault Category = "program_fault"
	// CategoryServerVersion: the server is older than the programs require.
	CategoryServerVersion Category = "server_version"
	// CategoryDedupConflict: the request's EvaluationID was recorded, within
	// the policy's dedup window, for an evaluation with another cost or
	// another policy (ID or revision); nothing was consumed.
	CategoryDedupConflict Category = "dedup_conflict"
)
