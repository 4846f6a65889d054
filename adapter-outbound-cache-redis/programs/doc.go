// Package programs owns the atomic rate-limit programs (Redis Lua, embedded
// byte for byte; five algorithms, each in decision, charge and dedup
// variants), their generated manifest, the argument list a
// caller sends them, the 7-integer reply they return with its consistency
// check, and a pure-Go reference model of each algorithm that reproduces the
// programs' integer arithmetic exactly and serves as the test oracle.
//
// The specification is docs/programs.md; every arithmetic bound cites the
// F1-F2, S1-S3, T1-T2, G1-G2 and L1-L2 labels of ratelimit/policy.go.
//
// It depends on the standard library and shared-contract only. It must never
// import a Redis client, the redisrate provider, an inbound adapter or
// app-bootstrap: it is data and arithmetic, usable by any executor.
package programs
