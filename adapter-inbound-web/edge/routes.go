package edge

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/tech-log/tech-log-backend/adapter-inbound-web/internal/fields"
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
	// dedup: the policy has a dedup window, so an Idempotency-Key header
	// becomes the request's evaluation ID; otherwise the header is ignored.
	dedup bool
	// members is nil for one policy; for a policy set (ADR 0027) it is
	// every member, policy first, and policyField is their
	// RateLimit-Policy list, rendered once.
	members     []ratelimit.PolicyID
	policyField string
	// holds is the shortest hold of the target's concurrency limits (ADR
	// 0041): its admissions hold slots the edge gives back when the
	// handler returns, and the handler's context ends after holds; 0 when
	// no policy of the target holds.
	holds time.Duration
}

// shadows is what a pattern of the shadow table maps to (ADR 0037): the
// shadow policies a request matching it is also decided by, each on its
// own (shadow.go). It is registered as a handler only so that ServeMux's
// matching picks it, in a table of its own: a shadow pattern never changes
// which enforced policy decides a request.
type shadows struct{ ids []ratelimit.PolicyID }

// ServeHTTP is never called: the table only matches.
func (*shadows) ServeHTTP(http.ResponseWriter, *http.Request) {}

// shadowsFor is the shadow policies of the most specific shadow pattern r
// matches; nil for none.
func (m *Middleware) shadowsFor(r *http.Request) []ratelimit.PolicyID {
	if m.shadowRoutes == nil {
		return nil
	}
	if h := m.shadowRoutes.Handler(r); h != nil {
		if s, ok := h.(*shadows); ok {
			return s.ids
		}
	}
	return nil
}

// addMember makes t, a route already mapped to a policy, a policy set
// with id as its next member (Config.Routes: the same pattern for several
// policies). Every member must be among the configured policies, have no
// dedup window (an Idempotency-Key names one evaluation of one policy) and
// appear once. The error's field is Pattern or
// Policy.
func (m *Middleware) addMember(t *target, id ratelimit.PolicyID, policies map[ratelimit.PolicyID]ratelimit.Policy) (field string, err error) {
	if len(t.members) == 0 {
		t.members = []ratelimit.PolicyID{t.policy}
	}
	for _, have := range t.members {
		if have == id {
			return "Pattern", fmt.Errorf("policy %q is already mapped to this pattern", id)
		}
	}
	if len(t.members) == ratelimit.MaxSetMembers {
		return "Policy", fmt.Errorf("a policy set has at most %d members", ratelimit.MaxSetMembers)
	}
	t.members = append(t.members, id)
	list := make([]fields.Bucket, len(t.members))
	for i, member := range t.members {
		p, ok := policies[member]
		if !ok {
			return "Policy", fmt.Errorf("set member %q must be among Policies (its quota and window go into RateLimit-Policy)", member)
		}
		// The contract's rule (ratelimit.CanJoinSet); the edge's words.
		switch err := ratelimit.CanJoinSet(p); {
		case errors.Is(err, ratelimit.ErrSetMemberShadow):
			return "Policy", fmt.Errorf("set member %q is a shadow policy; it is decided beside the set, never in it (ADR 0037): %w", member, err)
		case errors.Is(err, ratelimit.ErrSetMemberDedup):
			return "Policy", fmt.Errorf("set member %q has a dedup window; a policy set cannot replay one evaluation: %w", member, err)
		case errors.Is(err, ratelimit.ErrSetMemberQueue):
			return "Policy", fmt.Errorf("set member %q is a leaky bucket; a queue cannot be a policy-set member (ADR 0028): %w", member, err)
		}
		list[i] = fields.Bucket{Policy: string(member), Quota: p.Limit(), Window: windowSeconds(p), Concurrent: p.Holds()}
	}
	t.dedup = false
	t.policyField = fields.PolicyList(list)
	return "", nil
}

func (*target) ServeHTTP(http.ResponseWriter, *http.Request) {}

// windowSeconds is the policy window in whole seconds (ceiling, at least 1;
// 0 for the zero Policy): the window of fixed and sliding windows, the time
// a token bucket takes to refill from empty to full (Policy.WindowMillis),
// in integers.
func windowSeconds(p ratelimit.Policy) int64 {
	ms := p.WindowMillis()
	if ms <= 0 || p.Holds() {
		// A concurrency limit has no window: its quota is in flight
		// (fields.Bucket.Concurrent).
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
	if h := m.routes.Handler(r); h != nil {
		if t, ok := h.(*target); ok {
			return t
		}
	}
	return m.deflt
}

// addShadow adds the shadow policy id of Config.Routes to s, its
// pattern's entry in the shadow table: at most ratelimit.MaxSetMembers per
// pattern, none twice. The error's field is Pattern or Policy.
func addShadow(s *shadows, id ratelimit.PolicyID) (field string, err error) {
	if slices.Contains(s.ids, id) {
		return "Pattern", fmt.Errorf("policy %q is already mapped to this pattern", id)
	}
	if len(s.ids) == ratelimit.MaxSetMembers {
		return "Policy", fmt.Errorf("a pattern has at most %d shadow policies", ratelimit.MaxSetMembers)
	}
	s.ids = append(s.ids, id)
	return "", nil
}

// addPolicy adds the enforced policy id of Config.Routes to t, its
// pattern's target: as t's policy when it has none yet, else as the next
// member of its policy set (addMember). The error's field is Pattern or
// Policy.
func (m *Middleware) addPolicy(t *target, id ratelimit.PolicyID, policies map[ratelimit.PolicyID]ratelimit.Policy, windows map[ratelimit.PolicyID]int64, dedup map[ratelimit.PolicyID]bool) (field string, err error) {
	if p, ok := policies[id]; ok && p.Holds() {
		hold := time.Duration(p.WindowMillis()) * time.Millisecond
		if t.holds == 0 || hold < t.holds {
			t.holds = hold
		}
	}
	if t.policy == "" {
		t.policy, t.window, t.dedup = id, windows[id], dedup[id]
		return "", nil
	}
	return m.addMember(t, id, policies)
}
