package edge

import (
	"fmt"
	"net/http"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// target is what a pattern maps to. It is registered in the internal mux as a
// handler only so that ServeMux's own matching picks it.
type target struct {
	policy ratelimit.PolicyID
	exempt bool
	// window is the policy window in whole seconds for RateLimit-Policy;
	// 0 when unknown.
	window int64
}

func (*target) ServeHTTP(http.ResponseWriter, *http.Request) {}

// register adds pattern to mux, turning ServeMux's panic on an invalid or
// conflicting pattern into an error.
func register(mux *http.ServeMux, pattern string, t *target) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%v", p)
		}
	}()
	mux.Handle(pattern, t)
	return nil
}

// windowSeconds is the policy window in whole seconds (ceiling, at least 1;
// 0 for the zero Policy): the window of fixed and sliding windows, the time
// a token bucket takes to refill from empty to full (Policy.WindowMillis),
// in integers.
func windowSeconds(p ratelimit.Policy) int64 {
	ms := p.WindowMillis()
	if ms <= 0 {
		return 0
	}
	return max((ms+999)/1000, 1)
}

// policyFor returns the policy r is mapped to, and false when r matches an
// Exempt pattern. Requests that match no Route, including ones ServeMux would
// redirect or answer 405, get DefaultPolicy.
func (m *Middleware) policyFor(r *http.Request) (ratelimit.PolicyID, bool) {
	t := m.targetFor(r)
	return t.policy, !t.exempt
}

func (m *Middleware) targetFor(r *http.Request) *target {
	if h, _ := m.routes.Handler(r); h != nil {
		if t, ok := h.(*target); ok {
			return t
		}
	}
	return m.deflt
}
