// Package programs owns the atomic rate-limit programs (Redis Lua, embedded
// byte for byte; five algorithms, each in decision, charge, dedup and
// refund variants), their generated manifest, the argument list a
// caller sends them, the 7-integer reply they return with its consistency
// check, and a pure-Go reference model of each algorithm that reproduces the
// programs' integer arithmetic exactly and serves as the test oracle.
//
// The specification is docs/programs.md; every arithmetic bound cites the
// F1-F2, S1-S3, T1-T2, G1-G2 and L1-L2 labels of ratelimit/policy.go.
//
// Files: doc.go; programs.go (the embedded programs, the manifest,
// ForAlgorithm, ChargeFor, DedupFor, RefundFor); generate.go (go generate);
// args.go (the ARGV: Args, RefundArgs); bound.go (a decision program
// bound to one policy's parameters: Bind, BoundArgs; ADR 0030); reply.go (Reply, Status, Check);
// state.go (State, Decode, LogEntries); model.go (Evaluate); charge.go
// (Charge); dedup.go (EvaluateDedup, DedupArgs); refund.go (Refund, ADR
// 0025); set.go (the policy-set program: SetProgram, SetArgs, EvaluateSet,
// DecodeSet; ADR 0026); rate-<algorithm>[-charge|-dedup|-refund]-v<n>.lua,
// rate-set-v1.lua and manifest.json (generated from luasrc); luasrc/ (the
// templates); testdata/ (the vector files).
//
// It depends on the standard library and shared-contract only. It must never
// import a Redis client, the redisrate provider, an inbound adapter or
// app-bootstrap: it is data and arithmetic, usable by any executor.
package programs
