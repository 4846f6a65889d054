// Package wiring is the composition root: it turns a config.Config into an
// fx application with one fx.Module per capability.
//
//   - metrics: the private Prometheus registry (always).
//   - ratelimit: the policy file's generations (Policies: a coordination
//     client, the redisrate Provider, its decorators and the web edge's
//     handler each), reloaded without a restart on a file change or
//     SIGHUP (ADR 0038), and the instrumented ratelimit.EdgePort of the
//     serving one; included only when APP_RATE_LIMIT_ENABLED=true. Its
//     OnStart runs the server version and script checks and starts the
//     watch, its OnStop closes the last generation.
//   - cache: the cache's own Redis client and the fail-open cache.Store;
//     included only when APP_CACHE_ENABLED=true. It never sees the
//     coordination client or configuration.
//   - web: the HTTP server (local limiter, edge middleware, health, ready,
//     metrics, example API routes) and, with APP_WEB_ADMIN_ADDR, the admin
//     listener (/metrics, the detailed /readyz). It takes the EdgePort as optional: in
//     disabled mode there is no port and the edge middleware is not built.
//
// Disabled mode creates no Redis client, connection or port, and one
// goroutine only while started: the SIGHUP handler that logs there is no
// policy file to reload. The package's tests prove it.
//
// Files: doc.go; app.go (Options, the metrics module, the logger, the
// go-redis logger); ratelimit.go (the ratelimit module, CoordinationClient,
// start, readiness, the serving generation's EdgePort); policygen.go (a
// policy generation, its drain, the revision rule); policyreload.go
// (Policies: the serving generation, its handler, the watch and SIGHUP);
// policyapply.go (one reload: checks, build, swap); rlspolicies.go (the
// RLS following a policy reload); cache.go (the cache module, the cache client);
// topology.go (byTopology, the one topology switch of both Redis clients);
// apikeys.go (API keys and their reload); sighup.go (onSIGHUP, the one
// SIGHUP hook); compose.go (the decorator stack, Limiter); rls.go,
// rlsdenial.go (the RLS module, its generations' denial-cache metrics);
// identity.go (CheckIdentity: the
// identity values config read, checked by the web adapter's rules and
// reported as config's errors, ADR 0036); rlscheck.go (CheckRLS: the RLS
// TLS files and undecided answer, the same way); health.go (health and ready
// handlers); readiness.go (ReadinessCheck); readydetail.go (the detailed
// /readyz); serverpolicy.go (server-policy warnings and gauges); connerr.go
// (ConnError, the operator's hint on a failed connection); web.go (the web
// module, the web and admin handlers and the stages they compose);
// server.go (Server: the public and admin listeners, their timeouts, start
// and graceful stop).
//
// Only app-bootstrap imports fx, and nothing imports app-bootstrap; it
// builds Redis clients only through the capabilities' constructors
// (redisrate, rediscache), never with a go-redis option literal of its own.
package wiring
