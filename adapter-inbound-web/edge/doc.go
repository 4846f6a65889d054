// Package edge owns the HTTP middleware over ratelimit.EdgePort: it maps a
// request to a policy (net/http ServeMux patterns, ServeMux precedence, a
// default policy for the rest), derives the subject digest (package subject),
// asks the port with cost 1 (or a CostFunc) and a bounded deadline, and turns
// the outcome into a response:
//
//   - allowed: the next handler runs, with RateLimit-Limit, RateLimit-Remaining,
//     RateLimit-Reset and RateLimit-Policy fields;
//   - denied: 429 with Retry-After and the same fields;
//   - Unavailable, Indeterminate, Incompatible, or a nil or unknown outcome:
//     fail closed with 503, Retry-After and an application/problem+json body
//     naming the outcome kind, category and policy, never the subject or a
//     cause's text.
//
// Metrics are left to the caller through the Observer hook. See
// docs/http.md for the exact formats.
//
// It imports only the standard library, shared-contract and this module's
// subject package. It must never import another adapter, app-bootstrap, fx,
// go-redis or a metrics library.
package edge
