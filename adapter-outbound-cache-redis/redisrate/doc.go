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
// One request reads Evaluate (evaluate.go: precheck, the state key) ->
// the send loop (internal/send: the key's target, its in-flight bound,
// breaker, batcher and qualification, NOSCRIPT and the cluster's redirects
// followed, one typed result) -> outcome (evaluate.go again, one case per
// result variant). The send
// path never names the provider: it gets a qualification function and
// returns values.
//
// Files: doc.go; provider.go (New, Options, per-policy state); evaluate.go
// (one request: Evaluate, precheck, the state key, send result to outcome,
// one case per variant); dedup.go (the retry of a lost reply for a request
// with an evaluation ID, DedupRetries); sendpath.go (the send path's public
// names: breaker options and states, PipelineStats, the breaker
// accessors); serverpolicy.go (server-policy checks, ServerStatus);
// lifecycle.go (Start, Ready, Close, qualification of a target);
// client.go (ClientConfig, NewClient, the coordination client's profile
// and its mapping to internal/redisclient's one option set, the client
// option checks); topology.go (SentinelConfig, NewFailoverClient,
// NewClusterClient, the cluster option checks); defaults.go (the service
// defaults, the derived evaluation timeout, the retry-after hints);
// charge.go (EvaluateAfterCharge and Charge: the exported
// charges the local fallback, package ratefallback, reconciles through;
// the charge itself is pipelined by the send loop, internal/send
// precharge.go); errors.go (sentinels, CallError, ServerRefusalReason);
// keys.go (the key format: StateKey, DedupKey; the per-policy state);
// refund.go (Refund: a receipt given back by its policy's refund program,
// ADR 0025); set.go (EvaluateSet: a policy set decided member by member in order,
// the admitted members refunded when one does not admit; ADR 0027).
//
// The option literal, dialer, TLS and topology construction are
// internal/redisclient's, shared with the cache; the coordination client's
// own part (no context deadline, the handshake probe, waits within one
// command timeout) is its redisclient.Profile.
//
// It imports shared-contract, the programs package, internal/certainty,
// internal/send, internal/redisclient, redisinfo and go-redis. It must never import the cache store (rediscache)
// or share a client, configuration or decorator with it, never import an
// inbound adapter, the local fallback (ratefallback, which decorates it),
// app-bootstrap, fx or testcontainers (redistest is for
// its tests only).
package redisrate
