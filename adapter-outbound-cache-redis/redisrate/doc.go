// Package redisrate is the Redis provider of ratelimit.EdgePort: the
// dedicated coordination client (NewClient), the structured executor that runs
// the embedded programs (EVALSHA, then exactly one EVAL of the exact source on
// NOSCRIPT and on nothing else), the strict 7-integer reply parser, the
// failure-certainty classifier, and the Provider that ties them together.
//
// Failure certainty is the point of the package: every failure is reported as
// Unavailable only when it is known that no byte of the program call reached
// the server or that the server refused before running it; a failure after
// the call may have been written is Indeterminate; a reply or state the
// provider does not understand is Incompatible. docs/failure-certainty.md
// holds the table and the reasoning.
//
// Files by concern: client.go (NewClient and the option checks New applies
// to a caller's client), provider.go (New, Options, per-policy state),
// evaluate.go (Evaluate: precheck, call, outcome), executor.go (the only
// sender of a program), lifecycle.go (Start, Ready, Close, INFO and version parsing),
// errors.go (sentinels, CallError, ServerRefusalReason), keys.go (the state key), topology.go
// (NewFailoverClient and NewClusterClient) and cluster.go (the Provider's own
// slot routing: MOVED, ASK, TRYAGAIN and CLUSTERDOWN followed, nothing that
// may have run ever re-sent), breaker.go (the circuit breaker: two hooks in
// Evaluate, one background prober). Failure certainty (error to verdict,
// the refusals a sender follows) is internal/certainty's.
//
// It imports shared-contract, the programs package and go-redis. It must
// never import the cache store (rediscache) or share a client, configuration
// or decorator with it, never import an inbound adapter, app-bootstrap, fx or
// testcontainers (redistest is for its tests only).
package redisrate
