// Package health owns the liveness and readiness endpoints: /healthz answers
// 200 while the process serves; /readyz asks a ReadinessChecker (in
// production the Redis provider's PING on its coordination client, wired by
// app-bootstrap) within a bounded timeout and answers 200 or 503. Without a
// checker /readyz is 200. ReadinessSummary (RegisterPublic) is the /readyz
// of a public listener: the same check, answered ready or not without any
// detail, when the detailed document is served on an admin listener. Drain
// turns /readyz to 503 for graceful shutdown.
//
// It imports only the standard library. It must never import another
// adapter, app-bootstrap, fx, go-redis or a metrics library.
package health
