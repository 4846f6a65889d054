// Package edge owns the HTTP middleware over ratelimit.EdgePort: it maps a
// request to a policy (net/http ServeMux patterns, ServeMux precedence, a
// default policy for the rest; routes.go), reads the identity through a
// subject.Identifier (the client IP by default; an identity error is 401,
// 400 or 500 without asking the port) and derives its digest, asks the port
// with cost 1 (or a CostFunc) and a bounded deadline, and turns the outcome
// into a response (serve.go: Wrap, one request, its fields and the
// Observation; Config and New are edge.go's). A pattern mapped to several
// policies is a policy set (ADR 0027), evaluated all or nothing through
// ratelimit.EdgePort.EvaluateSet: RateLimit names the member that speaks for the set
// (ratelimit.Deciding), RateLimit-Policy lists every member and Retry-After
// is the largest member's:
//
//   - allowed with a delay (a leaky-bucket queue's slot, ADR 0028): the
//     request is held until its slot, then passed on with the delay in
//     DelayHeader and DelayFrom; a request whose context ends first is not
//     passed on and its slot is refunded through ratelimit.EdgePort.Refund
//     (queue.go);
//   - allowed: the next handler runs, with the RateLimit and RateLimit-Policy
//     fields of the current draft and, unless switched off, the older
//     RateLimit-Limit, RateLimit-Remaining and RateLimit-Reset (the syntax
//     is owned by internal/fields);
//   - denied: 429 with Retry-After and the same fields;
//   - Unavailable, Indeterminate, Incompatible, or a nil or unknown outcome:
//     fail closed with 503, Retry-After and an application/problem+json body
//     naming the outcome kind, category and policy, never the subject or a
//     cause's text (problem.go; the writer is internal/problem, shared with
//     the local limiter and the identity gate).
//
// A route's shadow policies (ADR 0037: ratelimit.Shadow, known from
// Config.Policies) are decided each on its own beside the enforced call
// and never change the response (shadow.go).
//
// HTTP metrics (responses, queue delays) are left to the caller through
// the Observer hook; the port's outcomes are counted on the port, by a
// decorator, once (ADR 0033). See
// docs/http.md for the exact formats.
//
// It imports only the standard library, shared-contract and this module's
// subject, internal/fields and internal/problem packages. It must never import another adapter, app-bootstrap, fx,
// go-redis or a metrics library.
package edge
