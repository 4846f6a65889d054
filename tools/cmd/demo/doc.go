// Command demo shows the distributed limiter at work: it starts a private
// redis-server on a free 127.0.0.1 port, builds the service and starts two
// instances of it sharing that Redis, drives bounded load at both from a
// few clients, and prints what each instance allowed next to the policy's
// global limit. A second phase stops Redis and shows the instances failing
// closed (503) for a client phase 1 never used (one it denied may get its
// cached denial, 429, until an instance sees Redis gone: ADR 0022). Everything it starts is stopped and its temporary
// directory removed when it ends, on error and on Ctrl-C too.
//
// Usage (from tools/, as `make demo` does):
//
//	go run ./cmd/demo -root ..
//
// With -cluster (`make demo-cluster`) the instances run against a private
// 3-primary Redis Cluster instead (APP_RATE_LIMIT_REDIS_MODE=cluster), and
// the demo prints how many rate-limit keys each primary holds.
//
// With -fallback (`make demo-fallback`) the demo policy is
// "local-fallback" for 2 instances: phase 2 stops Redis (its state saved)
// and shows each instance deciding locally on half the limit; phase 3
// restarts Redis with its state and, with no pause, hammers a fresh client
// from both instances, and checks the bound of docs/degraded-mode.md per
// window (nothing admitted beyond max(L, U + A)) and that
// tlb_ratelimit_fallback_pending returns to 0.
//
// Every check exits non-zero when what the demo shows does not hold.
//
// Files: main.go (flags, the run), process.go (redis-server, the build,
// the instances), load.go (the bounded load), report.go (the tables and
// the phase 1-2 verdict), recovery.go (the -fallback outage and recovery),
// recovery_verdict.go (its verdict: the decisions tallied per window
// against the bound of docs/degraded-mode.md), cluster.go (-cluster's private cluster).
//
// It needs redis-server on PATH (apt-get install redis-server) and the Go
// toolchain. All traffic stays on 127.0.0.1.
//
// Like everything under tools/, it may import any module of the workspace;
// no product module may import it. It runs the real service binary and
// talks to it over HTTP only.
package main
