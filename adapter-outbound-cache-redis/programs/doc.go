// Package programs owns the atomic rate-limit programs (Redis Lua, embedded
// byte for byte; six algorithms: fixed window, sliding-window counter, token
// bucket, GCRA, sliding log and leaky bucket, each in decision, charge and
// refund variants and all but the leaky bucket in a dedup variant; and the
// policy-set program), their generated manifest, the argument list a
// caller sends them, the 7-integer reply they return with its consistency
// check, and a pure-Go reference model of each algorithm that reproduces the
// programs' integer arithmetic exactly and serves as the test oracle.
//
// The specification is docs/programs.md (the contract they keep is
// docs/contract.md); every arithmetic bound cites the A1-A4, F1-F2, S1-S3,
// T1-T2, G1-G2, Q1 and L1-L2 labels of docs/arithmetic.md, which
// ratelimit/policy.go checks.
//
// Files: doc.go; programs.go (the embedded programs, the manifest,
// Verify, All, Charges, ForAlgorithm, ChargeFor, DedupFor, RefundFor);
// generate.go (go generate); args.go (the ARGV: Args, RefundArgs); bound.go
// (a policy's programs in one lookup, ForPolicy and its Bundle: decision,
// charge and dedup rendered from the templates with the policy's
// parameters as constants, no rewriting of rendered text; Bind,
// BoundArgs; ADR 0030, ADR 0035); reply.go (Reply, Status, the reply fields, Waits, Millis);
// check.go (Reply.Check, the range, status and consistency rule, and
// ErrMalformedReply); numbers.go (a policy's numbers as the programs
// receive them, shared by Check and the model); decode.go (Decode,
// ReplyError and the bounded rendering of a reply that is not one);
// state.go (State, State.Decode, LogEntries); algorithm.go (the registry
// of each algorithm's Redis-level half, model: template slug, state
// layout, ARGV and numbers, the reference model of its decision, charge
// and refund; ADR 0034); alg_<name>.go (one per algorithm: its model and arithmetic);
// model.go (Evaluate, EvaluateMicros, the steps every program shares, the
// model's checked arithmetic); charge.go (Charge); carry.go (Consumed,
// Carry: the model of a change of limit, ADR 0039, no program yet); dedup.go
// (EvaluateDedup, DedupArgs); refund.go (Refund, ADR 0025); set.go (the policy-set program: SetProgram, SetArgs, EvaluateSet,
// DecodeSet; ADR 0026); rate-<algorithm>-v1.lua, rate-<algorithm>-charge-v1.lua,
// rate-<algorithm>-refund-v1.lua, rate-<algorithm>-dedup-v2.lua,
// rate-set-v1.lua and manifest.json (the generic renderings, generated
// from luasrc: the reference the vectors run beside the bound programs, the
// set program and the refund program the provider sends); luasrc/ (the
// templates, also rendered at start-up for each policy by ForPolicy); testdata/ (the vector files: rate-vectors-v1.json for the
// first three algorithms, gcra-vectors-v1.json, sliding-log-vectors-v1.json,
// refund-vectors-v1.json, dedup-vectors-v2.json).
//
// It depends on the standard library, shared-contract and its luasrc only. It must never
// import a Redis client, the redisrate provider, an inbound adapter or
// app-bootstrap: it is data and arithmetic, usable by any executor.
package programs
