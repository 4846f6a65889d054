// Package ratefallback is the local emergency fallback
// (docs/degraded-mode.md, section 2; ADR 0006, ADR 0017): an
// ratelimit.EdgePort decorator over the Redis provider that, for policies
// whose FailurePolicy is ratelimit.LocalFallback, answers the provider's
// Unavailable{connection} and Unavailable{circuit_open} with a decision of
// its own on this instance's share of the limit, and charges what it
// admitted to the global state once Redis answers again.
//
// Files: options.go (Provider, Options, New, errors), fallback.go
// (Fallback, Evaluate: the decorator and the
// charge of a subject's pending admissions in the same round trip as its
// next global decision), table.go (the bounded per-subject table, the
// local decision, the sweep), reconcile.go (the background pass: failed
// charges retried with backoff, Stats), share.go (SharePolicy), refund.go
// (Refund: a local receipt given back on the local table, a Redis one
// passed to the provider; ADR 0025), set.go
// (EvaluateSet: owed charges first, then the provider's set, and with
// Redis unreachable the members decided on their local shares all or
// nothing; ADR 0027).
//
// It uses only the exported API of the provider it decorates (Provider:
// Evaluate, EvaluateAfterCharge, Charge, as redisrate.Provider has them),
// so every charge goes through the provider's precheck, breaker and
// in-flight bound. It must never import the provider's internal packages
// or go-redis; app-bootstrap composes it.
package ratefallback
