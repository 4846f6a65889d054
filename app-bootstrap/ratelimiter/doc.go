// Package ratelimiter is the front door to the distributed rate limiter:
// one call builds a limiter with the service's defaults and every
// guarantee, and two calls cover most uses.
//
// Most callers want New and Allow:
//
//	limiter, err := ratelimiter.New(ctx, ratelimiter.Options{
//		Addr: "localhost:6379", Secret: secret, // 32 bytes or more
//		Policies: ratelimiter.Policies{"api": ratelimiter.PerSecond(10)},
//	})
//	...
//	decision, err := limiter.Allow(ctx, "api", "project:123")
//	if err != nil || !decision.Allowed {
//		// refuse: err is an undecided outcome (fail closed)
//	}
//
// and Middleware for a net/http server (the service's edge: client
// identity, RateLimit fields, 429 and 503). FromEnv reads the service's
// APP_ variables instead of Options.
//
// What New builds is the service's own composition (package wiring): the
// coordination client with its timeouts and pool (retries off, one dial
// attempt), HMAC keys (the subject is pseudonymized before it reaches
// Redis), fail closed, the circuit breaker, the denial cache and
// pipelining, with the service's defaults and validation (package
// config). Nothing is hidden: Options.Env takes any APP_ variable
// (Sentinel, cluster, TLS, ACL, timeouts, pool, breaker), Options.Client a
// go-redis client of your own (checked: one that could break the
// certainty rules is refused, naming the option), Limit's With methods
// reach every policy field (local fallback, dedup, routes and policy
// sets, scope), and Limiter hands out the port itself, outcomes
// unflattened.
//
// The package owns no limiter logic; it must not be imported by the
// adapters or shared-contract (app-bootstrap is the composition root).
package ratelimiter
