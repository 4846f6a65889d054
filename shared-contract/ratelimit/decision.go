package ratelimit

import (
	"fmt"
	"time"
)

// Source says where a decision was made.
type Source int

// The decision sources. The zero value is invalid.
const (
	// GlobalRedis: the shared Redis coordination state decided.
	GlobalRedis Source = iota + 1
	// LocalEmergency: the coordination store was unreachable and this
	// instance decided alone with its share of a LocalFallback policy's
	// limit (docs/degraded-mode.md).
	LocalEmergency
)

// String returns "global_redis" or "local_emergency".
func (s Source) String() string {
	switch s {
	case GlobalRedis:
		return "global_redis"
	case LocalEmergency:
		return "local_emergency"
	}
	return fmt.Sprintf("Source(%d)", int(s))
}

// Certainty says how exact a decision is with respect to the policy.
type Certainty int

// The certainties. The zero value is invalid.
const (
	// Certain: the algorithm is exact (fixed window, token bucket).
	Certain Certainty = iota + 1
	// ApproximateAlgorithm: the algorithm estimates (sliding-window
	// counter); the estimate is conservative.
	ApproximateAlgorithm
	// ApproximateLocal: a LocalEmergency decision: exact for this
	// instance's share, approximate for the global limit (other instances
	// decide on their own shares; docs/degraded-mode.md has the bound).
	ApproximateLocal
)

// String returns "certain", "approximate_algorithm" or
// "approximate_local".
func (c Certainty) String() string {
	switch c {
	case Certain:
		return "certain"
	case ApproximateAlgorithm:
		return "approximate_algorithm"
	case ApproximateLocal:
		return "approximate_local"
	}
	return fmt.Sprintf("Certainty(%d)", int(c))
}

// Decision is the answer of an evaluated policy. Denied is a Decision, not an
// error.
type Decision struct {
	Allowed bool
	// Limit is the policy's limit or capacity.
	Limit int64
	// Remaining is what is left after this request (0..Limit).
	Remaining int64
	// RetryAfter is 0 when allowed; when denied, the wait after which the
	// same request with no other traffic is allowed.
	RetryAfter time.Duration
	// ResetAt is the server instant at which the state is back to full.
	ResetAt time.Time
	// ServerNow is the server instant the decision was taken at (the
	// coordination server's clock, like ResetAt), so that the time to
	// reset, ResetAt - ServerNow, needs no other clock. Zero when the port
	// does not know it; see ResetAfter.
	ServerNow      time.Time
	PolicyID       PolicyID
	PolicyRevision int64
	Source         Source
	Certainty      Certainty
	// Replayed is true when the port answered a decision it had recorded
	// for the request's EvaluationID within the policy's dedup window (at
	// most Policy.DedupMaxReplays times per ID): the same decision,
	// ServerNow and ResetAt included, and nothing consumed by this call.
	Replayed bool
}

// ResetAfter is the time from the decision to ResetAt on the server's own
// clock, ResetAt - ServerNow, at least 0; ok is false when ServerNow is zero
// (the caller then has only its own clock to measure ResetAt against).
func (d Decision) ResetAfter() (wait time.Duration, ok bool) {
	if d.ServerNow.IsZero() {
		return 0, false
	}
	return max(d.ResetAt.Sub(d.ServerNow), 0), true
}

// String renders the decision for logs.
func (d Decision) String() string {
	verdict := "denied"
	if d.Allowed {
		verdict = "allowed"
	}
	return fmt.Sprintf("%s %s rev %d remaining %d/%d retry %v", verdict, d.PolicyID, d.PolicyRevision, d.Remaining, d.Limit, d.RetryAfter)
}
