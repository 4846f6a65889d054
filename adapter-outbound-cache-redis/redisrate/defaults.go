package redisrate

import "time"

// The service's defaults: app-bootstrap/config's defaults of
// APP_RATE_LIMIT_COMMAND_TIMEOUT, _DIAL_TIMEOUT, _BREAKER_THRESHOLD and
// _BREAKER_PROBE_INTERVAL are these (its tests check it), and the fault
// lane runs at them.
const (
	DefaultCommandTimeout       = 250 * time.Millisecond
	DefaultDialTimeout          = 250 * time.Millisecond
	DefaultBreakerThreshold     = 5
	DefaultBreakerProbeInterval = time.Second
)

// Factors of EvaluationTimeout.
const (
	// EvaluationTimeoutFactor: one program call (one command timeout) and
	// as long again for a pipeline turn, a NOSCRIPT fallback and the reply.
	EvaluationTimeoutFactor = 2
	// DedupEvaluationTimeoutFactor: one more command timeout, so that a
	// call whose reply was lost after a full command timeout can still be
	// retried once with a command timeout of its own (ADR 0017).
	DedupEvaluationTimeoutFactor = 3
)

// EvaluationTimeout is the evaluation deadline, from the request's start,
// that leaves the provider room for what it may send: EvaluationTimeoutFactor
// command timeouts, or DedupEvaluationTimeoutFactor when dedup is true (a
// policy has a dedup window, so a lost reply may be retried). It is the
// derived default of APP_WEB_EVALUATION_TIMEOUT.
func EvaluationTimeout(commandTimeout time.Duration, dedup bool) time.Duration {
	if dedup {
		return DedupEvaluationTimeoutFactor * commandTimeout
	}
	return EvaluationTimeoutFactor * commandTimeout
}

// Retry-after hints of failed outcomes (docs/failure-certainty.md).
const (
	// MinFailureRetryAfter is the least RetryAfter of an Unavailable or
	// Indeterminate outcome; the hint is max(MinFailureRetryAfter,
	// CommandTimeout): a retry sooner than one command timeout would meet
	// the same condition.
	MinFailureRetryAfter = time.Second
	// MaxClockRetryAfter caps the hint of Unavailable{clock_unsafe}, which
	// is otherwise the wait until the server clock is back within the
	// tolerated regression.
	MaxClockRetryAfter = time.Minute
)
