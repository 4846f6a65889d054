// Package redisrate is the Redis provider of ratelimit.EdgePort: the
// dedicated coordination client (NewClient, NewFailoverClient,
// NewClusterClient), the one send loop that runs the embedded programs
// (EVALSHA, then exactly one EVAL of the exact source on NOSCRIPT and on
// nothing else; in a cluster MOVED, ASK, TRYAGAIN and CLUSTERDOWN followed),
// and the Provider that ties them together.
//
// Failure certainty is the point of the package: every failure is reported as
// Unavailable only when it is known that no byte of the program call reached
// the server or that the server refused before running it; a failure after
// the call may have been written is Indeterminate; a reply or state the
// provider does not understand is Incompatible. docs/failure-certainty.md
// holds the table and the reasoning; internal/certainty holds the rules
// (error to verdict, the refusals a sender follows).
//
// One request reads Evaluate (evaluate.go: precheck, in-flight bound) ->
// the send loop (loop.go) over a route (route.go: one fixed target for a
// standalone or Sentinel endpoint; cluster.go and cluster_route.go: the
// slot map of primaries, each qualified before its first call), each
// target's breaker (breaker.go, breakers.go) and batcher (batch.go), one
// command written and its result collected (executor.go) as a typed send
// result (sent.go) -> outcome (outcome.go).
//
// Files: doc.go; provider.go (New, Options, per-policy state); evaluate.go
// (Evaluate, precheck, the dedup retry); outcome.go (send result to
// outcome, one case per variant); sent.go (the typed send result); loop.go
// (the send loop: NOSCRIPT, redirects, what may be sent again); route.go
// (targets and the fixed route); cluster.go (the cluster slot map, node
// qualification); cluster_route.go (the cluster as a route); executor.go
// (the wire argument, one command sent and collected); batch.go (the
// per-target batcher); breaker.go (one circuit breaker and its prober);
// breakers.go (a breaker per target, what a send counts for, the state
// accessors); serverpolicy.go (server-policy checks, ServerStatus);
// lifecycle.go (Start, Ready, Close, qualification); client.go
// (ClientConfig, NewClient, the client option checks); dialer.go (dialer,
// TLS, the handshake probe); topology.go (NewFailoverClient,
// NewClusterClient, the cluster option checks); defaults.go (the service
// defaults and the derived evaluation timeout); charge.go
// (EvaluateAfterCharge and Charge: the exported charges the local fallback,
// package ratefallback, reconciles through); precharge.go (a charge
// pipelined ahead of a program on the same connection); errors.go (sentinels,
// CallError, ServerRefusalReason); keys.go (the state key).
//
// It imports shared-contract, the programs package, internal/certainty,
// redisinfo and go-redis. It must never import the cache store (rediscache)
// or share a client, configuration or decorator with it, never import an
// inbound adapter, the local fallback (ratefallback, which decorates it),
// app-bootstrap, fx or testcontainers (redistest is for
// its tests only).
package redisrate
