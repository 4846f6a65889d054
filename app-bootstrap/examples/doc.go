// Package examples shows, as runnable Example functions (go doc
// github.com/tech-log/tech-log-backend/app-bootstrap/examples), how to use
// the distributed rate limiter from your own Go service:
//
//   - Example_netHTTP: the Redis provider (redisrate) and the edge middleware
//     (edge) in a plain net/http server, without fx;
//   - Example_fxModules: the same through the fx modules of package wiring
//     (RateLimitModule, MetricsModule) in your own fx application;
//   - Example_conformanceFake and TestCountingPortConforms: the conformance
//     kit (shared-contract/ratelimit/ratelimittest) for testing your own code
//     against the port, with its scriptable Fake and its Run suite.
//
// docs/embedding.md walks through both. The examples run under go test
// (the first two against a private redis-server they start on a free
// loopback port, package redisserver); without redis-server on PATH the
// package's tests are skipped, unless REDIS_REQUIRED=1. policies.json in this directory is the example policy
// file (the same as the service's embedded example).
//
// The package has no code of its own; it must never be imported.
package examples
