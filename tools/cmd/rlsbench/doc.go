// Command rlsbench measures our envoy.service.ratelimit.v3 server against
// the reference, envoyproxy/ratelimit's service_cmd (`make envoy-rls-bin`,
// ENVOY_RLS_VERSION in the Makefile), side by side on one private
// redis-server, with the same descriptors and the same closed-loop gRPC
// load generator (envoyrls.Load, go-control-plane's client), repetitions
// interleaved (the order of the two alternates per repetition):
//
//   - throughput and p99 at c=1, 16, 64 on a request of one descriptor and
//     on a request of three (the reference as configured by default: no
//     local cache, STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT=false);
//   - a flood of one over-limit descriptor (c=16), denials per second,
//     against the reference with its local cache on
//     (LOCAL_CACHE_SIZE_IN_BYTES);
//   - Redis memory per descriptor value: used_memory (INFO memory) before
//     and after N distinct values, and MEMORY USAGE of the keys written.
//
// It prints a table of medians and the ratios ours/reference of the same
// repetition, and writes it into docs/performance.md between
// "<!-- rls-bench:begin -->" and "<!-- rls-bench:end -->" (not with
// -smoke, -ref-only or -flood-only; -flood-only runs the flood phase
// alone and prints its rows). Nothing in it is a pass/fail assertion: the targets
// are printed next to what was measured.
//
// Usage (from tools/, as `make bench-rls` does):
//
//	go run ./cmd/rlsbench -root ..
//
// Everything it starts is stopped when it ends, on error too; all traffic
// stays on 127.0.0.1.
package main
