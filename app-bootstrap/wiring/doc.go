// Package wiring is the composition root: it turns a config.Config into an
// fx application with one fx.Module per capability.
//
//   - metrics: the private Prometheus registry (always).
//   - ratelimit: the Redis coordination client, the redisrate Provider and
//     the instrumented ratelimit.EdgePort; included only when
//     APP_RATE_LIMIT_ENABLED=true. Its OnStart runs the server version and
//     script checks, its OnStop closes the client.
//   - cache: the cache's own Redis client and the fail-open cache.Store;
//     included only when APP_CACHE_ENABLED=true. It never sees the
//     coordination client or configuration.
//   - web: the HTTP server (local limiter, edge middleware, health, ready,
//     metrics, example API routes) and, with APP_WEB_ADMIN_ADDR, the admin
//     listener (/metrics, the detailed /readyz). It takes the EdgePort as optional: in
//     disabled mode there is no port and the edge middleware is not built.
//
// Disabled mode creates no Redis client, connection, goroutine or port; the
// package's tests prove it.
//
// Only app-bootstrap imports fx, and nothing imports app-bootstrap.
package wiring
