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
