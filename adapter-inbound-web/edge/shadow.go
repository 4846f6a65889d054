package edge

import (
	"context"
	"net/http"
	"time"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// Shadow policies (ADR 0037): a policy whose Enforcement is
// ratelimit.Shadow, given in Config.Policies, is decided on the requests
// its routes match and counted (by the port's decorators: the service's
// metrics count would_allow, would_deny and undecided per policy), but its
// outcome never reaches the response:
//
//   - its routes are a table of their own (shadowsFor): a request is
//     decided by the enforced policy its routes give (or the default
//     policy) exactly as without the shadow policy, and by the shadow
//     policies of the most specific shadow pattern it matches besides, so
//     a dark launch on a narrower pattern never takes requests out of the
//     enforced limit;
//   - each shadow policy is its own ratelimit.EdgePort.Evaluate, never a
//     policy-set member, so a shadow denial never refuses a set;
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
//   - at most Config.ShadowMaxInFlight shadow calls are in flight at once;
//     beyond it a shadow call is skipped (Config.ShadowSkipped is told), so
//     shadow load never takes more of the port's in-flight bound
//     (APP_RATE_LIMIT_MAX_IN_FLIGHT) than that from the enforced calls;
//   - an exempt request, or one whose identity cannot be read, is decided
//     by no shadow policy.

// DefaultShadowMaxInFlight is Config.ShadowMaxInFlight's default.
const DefaultShadowMaxInFlight = 16

// MaxShadowInFlight bounds Config.ShadowMaxInFlight.
const MaxShadowInFlight = 4096

// startShadows starts one evaluation of each of the shadow policies ids
// for digest with deadline, each on its own goroutine with a context that
// keeps r's values but not its cancellation (the request may be answered
// first) and ends at deadline. It returns at once. The cost of each is
// m.cost's for that policy, read here, on the request's goroutine.
func (m *Middleware) startShadows(r *http.Request, ids []ratelimit.PolicyID, digest ratelimit.SubjectDigest, deadline time.Time) {
	base := context.WithoutCancel(r.Context())
	for _, id := range ids {
		cost := int64(1)
		if m.cost != nil {
			cost = m.cost(r, id)
		}
		select {
		case m.shadowSlots <- struct{}{}:
		default:
			if m.shadowSkipped != nil {
				m.shadowSkipped(id)
			}
			continue
		}
		req := ratelimit.Request{PolicyID: id, SubjectDigest: digest, Cost: cost, Deadline: deadline}
		ctx, cancel := context.WithDeadline(base, deadline)
		go func() {
			defer func() { <-m.shadowSlots }()
			defer cancel()
			m.evaluateShadow(ctx, req)
		}()
	}
}

// evaluateShadow is one shadow call. net/http recovers a handler's panic;
// nothing would recover a shadow goroutine's, so the contract's one guard
// keeps a port that breaks the no-panic rule from taking the process down.
func (m *Middleware) evaluateShadow(ctx context.Context, req ratelimit.Request) (out ratelimit.Outcome) {
	defer ratelimit.Recover(&out, req.PolicyID, "edge shadow")
	return m.port.Evaluate(ctx, req)
}
