// Package ratelimit is the provider-neutral edge rate-limit contract: the
// one EdgePort that an inbound adapter calls and every decorator and
// provider implements (ADR 0033): Evaluate a Request, EvaluateSet a policy
// set all or nothing (SetRequest, Scope, Deciding; ADR 0027), Refund an
// admission by its Receipt (ADR 0025); the immutable Policy a provider
// enforces, the sealed Outcome it gets back, and the rules every layer
// shares: Recover (the one program-fault guard), PolicyID.Known,
// Request.ScopedTo, CanJoinSet, DenialCacheExact.
//
// It owns the semantics of admission (fail closed: only an allowed Evaluated
// outcome admits), the failure taxonomy (Unavailable, Indeterminate,
// Incompatible, each with a stable Category) and the integer-arithmetic bounds
// every provider must respect (MaxExactInt, MaxServerMillis,
// MaxHorizonMillis, WeightScale; formulas in docs/arithmetic.md).
//
// Files: doc.go; port.go (EdgePort, Recover, ErrPanic, PolicyID.Known);
// request.go (Request, its ID types, Validate, EffectiveDeadline,
// MaxEvaluationTimeout); policy.go (Policy, PolicySpec, NewPolicy, the
// accessors and the construction errors); failurepolicy.go
// (FailurePolicy, MaxFallbackInstances); enforcement.go (Enforcement:
// enforced or shadow, ADR 0037); algorithm.go (the
// Algorithm enum, the registry of AlgorithmSpec, one line per algorithm,
// and the policy-file field table ParamField; ADR 0034); alg_<name>.go (one
// per algorithm: its parameter type, its AlgorithmSpec, its numbers, the
// checks of its formulas of docs/arithmetic.md and its local-fallback
// share); params.go (the sealed Params sum and Policy's per-algorithm
// numbers); arithmetic.go (the integer edges MaxExactInt,
// MaxServerMillis, MaxHorizonMillis, WeightScale, the compile-time proof
// of A1, the overflow-free helpers and the validator the checks use);
// outcome.go (the sealed Outcome, Decision, Certainty, Receipt);
// category.go (Category); set.go (Scope, ScopedTo, CanJoinSet, SetRequest,
// Deciding); denialrule.go (DenialCacheExact, MaxDenialCacheEntries);
// replays.go (CheckDedupMaxReplays).
//
// It must never import anything outside the Go standard library and its
// sibling package keyspace: no Redis client, no HTTP framework, no
// dependency-injection container, no adapter. Providers live in adapter
// modules and depend on this package, never the other way round.
package ratelimit
