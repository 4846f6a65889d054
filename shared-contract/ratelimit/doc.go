// Package ratelimit is the provider-neutral edge rate-limit contract: the
// EdgePort that an inbound adapter calls, the Request it sends, the immutable
// Policy a provider enforces, and the sealed Outcome it gets back; beside
// it the SetPort that evaluates a policy set all or nothing (SetRequest,
// Scope, Deciding; ADR 0027) and the Refunder that gives an admission back
// by its Receipt (ADR 0025).
//
// It owns the semantics of admission (fail closed: only an allowed Evaluated
// outcome admits), the failure taxonomy (Unavailable, Indeterminate,
// Incompatible, each with a stable Category) and the integer-arithmetic bounds
// every provider must respect (MaxExactInt, MaxServerMillis,
// MaxHorizonMillis, WeightScale; formulas in docs/arithmetic.md).
//
// Files: doc.go; request.go (EdgePort, Request, its ID types, Validate,
// EffectiveDeadline); policy.go (Policy, PolicySpec, NewPolicy, the
// accessors, FailurePolicy and the construction errors); algorithm.go (the
// Algorithm enum, the registry of AlgorithmSpec, one line per algorithm,
// and the policy-file field table ParamField; ADR 0034); alg_<name>.go (one
// per algorithm: its parameter type, its AlgorithmSpec, its numbers, the
// checks of its formulas of docs/arithmetic.md and its local-fallback
// share); params.go (the sealed Params sum and Policy's per-algorithm
// numbers); arithmetic.go (the integer edges MaxExactInt,
// MaxServerMillis, MaxHorizonMillis, WeightScale, the compile-time proof
// of A1, the overflow-free helpers and the validator the checks use);
// outcome.go (the sealed Outcome, Decision, Certainty, Receipt);
// category.go (Category); set.go (Scope, SetPort, SetRequest, Deciding,
// Refunder).
//
// It must never import anything outside the Go standard library and its
// sibling package keyspace: no Redis client, no HTTP framework, no
// dependency-injection container, no adapter. Providers live in adapter
// modules and depend on this package, never the other way round.
package ratelimit
