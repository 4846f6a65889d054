package edge

import (
	"context"
	"net/http"
	"time"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// Shadow policies (ADR 0037): a policy whose Enforcement is
// ratelimit.Shadow, given in Config.Policies, is decided on the routes
// that name it and counted (by the port's decorators: the service's
// metrics count would_allow, would_deny and undecided per policy), but its
// outcome never reaches the response:
//
//   - each shadow policy of a route is its own ratelimit.EdgePort.Evaluate,
//     never a policy-set member, so a shadow denial never refuses a set;
//   - the calls start when the enforced call does, on their own
//     goroutines, so that the provider can pipeline them with it (ADR
//     0012), with the enforced request's deadline; the edge never waits
//     for them, so they cannot delay the response, and each goroutine
//     ends by that deadline (its context has it) whatever the request
//     does;
//   - they carry no evaluation ID (an Idempotency-Key names one
//     evaluation of the enforced policy; the same ID under a second policy
//     would be a dedup conflict), a shadow queue's delay is never waited
//     out, and a shadow admission is never refunded: the enforced policy's
//     429, 503 or a held request that leaves keep the shadow charge. Each
//     of these errs towards would_deny, never the other way;
//   - a route whose only policies are shadow runs the handler for every
//     request, writes no RateLimit field and is not observed (Observer);
//     its shadow calls start once the identity is read, and a request
//     whose identity cannot be read is passed on without them.

// startShadows starts one evaluation of each of t's shadow policies for
// digest with deadline, each on its own goroutine with a context that
// keeps r's values but not its cancellation (the request may be answered
// first) and ends at deadline. It returns at once. The cost of each is
// m.cost's for that policy, read here, on the request's goroutine.
func (m *Middleware) startShadows(r *http.Request, t *target, digest ratelimit.SubjectDigest, deadline time.Time) {
	base := context.WithoutCancel(r.Context())
	for _, id := range t.shadows {
		cost := int64(1)
		if m.cost != nil {
			cost = m.cost(r, id)
		}
		req := ratelimit.Request{PolicyID: id, SubjectDigest: digest, Cost: cost, Deadline: deadline}
		ctx, cancel := context.WithDeadline(base, deadline)
		go func() {
			defer cancel()
			// net/http recovers a handler's panic; nothing would recover
			// this goroutine's, and a shadow call must never take the
			// process down (the contract forbids the panic; this is the
			// guard against a port that breaks it).
			defer func() { _ = recover() }()
			m.port.Evaluate(ctx, req)
		}()
	}
}

// serveShadowOnly is a request to a route whose only policies are shadow:
// the shadow calls start once the identity is read, and the handler runs
// whatever they answer, without a RateLimit field.
func (m *Middleware) serveShadowOnly(w http.ResponseWriter, r *http.Request, t *target, next http.Handler) {
	if id, err := m.subjects.Identify(r); err == nil {
		if digest, err := m.pseudo.Digest(id); err == nil {
			m.startShadows(r, t, digest, ratelimit.Request{Deadline: m.now().Add(m.timeout)}.EffectiveDeadline(r.Context()))
		}
	}
	next.ServeHTTP(w, r)
}
