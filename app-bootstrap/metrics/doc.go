// Package metrics owns the service's Prometheus instrumentation: a private
// registry (Go and process collectors included), the EdgePort decorator that
// counts rate-limit outcomes and times evaluations, the cache fail-open
// counter, and the /metrics handler.
//
// Label values are bounded: policy IDs come from the configured set (any
// other ID is counted as "other"), kinds and categories are the stable
// constants of package ratelimit, cache operations are rediscache's Op
// names. No subject, key, address or secret ever becomes a label.
//
// It imports shared-contract and prometheus/client_golang. It must never
// import fx, a Redis client or the adapters.
//
// Files: metrics.go (Metrics, the registry, the metric names, the web
// and cache counters), edge.go (Edge, the EdgePort decorator, and the
// outcome labels), reports.go (what the provider and its decorators report
// at scrape time: the breaker, dedup retries, the pipeline, the local
// fallback, the denial cache), breakers.go (a breaker gauge per target),
// server.go (the coordination server's status gauges), shadow.go (the
// shadow policies' would-allow, would-deny and undecided counter, ADR
// 0037), policyreload.go (the policy file's reloads by trigger and result,
// the serving revisions and load time), plans.go (decisions by plan and
// the plan cache's lookups, ADR 0040).
package metrics
