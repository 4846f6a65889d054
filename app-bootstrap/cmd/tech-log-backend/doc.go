// Command tech-log-backend is the service: the HTTP API behind the legacy
// local limiter and, when APP_RATE_LIMIT_ENABLED=true, the Redis-coordinated
// edge limiter, with /healthz, /readyz and /metrics.
//
// Usage:
//
//	tech-log-backend [-addr host:port]
//
// Configuration is read from APP_ environment variables (see README.md,
// "Configuration"); -addr overrides APP_WEB_ADDR. A configuration error
// prints one line per problem, each naming its variable, and exits 2. The
// service stops gracefully on SIGINT or SIGTERM within APP_SHUTDOWN_TIMEOUT.
//
// It is the process entry point and nothing else: the graph lives in
// package wiring, the configuration in package config. Being package main,
// nothing can import it; it must never hold logic another package needs.
//
// Files: main.go (flags, configuration, the fx app, shutdown),
// healthcheck.go (-healthcheck: the image's HEALTHCHECK probe).
package main
