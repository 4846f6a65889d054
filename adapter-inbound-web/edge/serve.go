package edge

import (
	"net/http"
	"time"

	"github.com/tech-log/tech-log-backend/adapter-inbound-web/internal/fields"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// Wrap returns next behind the middleware.
func (m *Middleware) Wrap(next http.Handler) http.Handler {
	if next == nil {
		panic("edge: Wrap with a nil next handler")
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.serve(w, r, next)
	})
}

// serve is one request: route to policy, identity, digest, evaluation, then
// the answer for the outcome.
func (m *Middleware) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	// Only the edge says a request was held (DelayHeader): never a client.
	r.Header.Del(DelayHeader)
	t := m.targetFor(r)
	if t.exempt {
		next.ServeHTTP(w, r)
		return
	}
	id, err := m.subjects.Identify(r)
	if err != nil {
		m.refuseIdentity(w, t, err)
		return
	}
	digest, err := m.pseudo.Digest(id)
	if err != nil {
		m.observe(Observation{Policy: t.policy, Status: http.StatusInternalServerError})
		writeInternalError(w, t.policy)
		return
	}
	var evalID ratelimit.EvaluationID
	if t.dedup {
		key, present, err := idempotencyKey(r.Header)
		if err != nil {
			m.observe(Observation{Policy: t.policy, Status: http.StatusBadRequest})
			writeBadIdempotencyKey(w, t.policy, err)
			return
		}
		if present {
			if evalID, err = m.pseudo.EvaluationID(digest, key); err != nil {
				m.observe(Observation{Policy: t.policy, Status: http.StatusInternalServerError})
				writeInternalError(w, t.policy)
				return
			}
		}
	}
	cost := int64(1)
	if m.cost != nil {
		cost = m.cost(r, t.policy)
	}
	now := m.now()
	// The earlier of now+Timeout and the request context's deadline: the
	// contract's one rule (Request.EffectiveDeadline).
	req := ratelimit.Request{PolicyID: t.policy, SubjectDigest: digest, Cost: cost, EvaluationID: evalID, Deadline: now.Add(m.timeout)}
	req.Deadline = req.EffectiveDeadline(r.Context())
	if ids := m.shadowsFor(r); ids != nil {
		// The request's shadow policies start beside the enforced call,
		// each on its own; their outcomes never reach this response
		// (shadow.go: not on the request path without them).
		m.startShadows(r, ids, digest, req.Deadline)
	}
	var out ratelimit.Outcome
	if t.members == nil {
		out = m.port.Evaluate(r.Context(), req)
	} else {
		out = m.port.EvaluateSet(r.Context(), ratelimit.SetRequest{Members: t.members, SubjectDigest: digest, Cost: cost, Deadline: req.Deadline})
	}

	obs := Observation{Policy: t.policy}
	switch o := out.(type) {
	case ratelimit.Evaluated:
		m.setDecisionFields(w.Header(), t, o.Decision, now)
		if ratelimit.Admitted(out) {
			if o.Decision.Delay > 0 && t.members == nil {
				// A leaky bucket's slot (ADR 0028); a set has no queue member.
				held, ok := m.hold(w, r, req, o.Decision, &obs)
				if !ok {
					m.observe(obs)
					return
				}
				r = held
			}
			obs.Admitted = true
			m.observe(obs)
			if t.holds > 0 {
				m.serveHolding(w, r, next, t, req, o, now)
				return
			}
			next.ServeHTTP(w, r)
			return
		}
		obs.Status = http.StatusTooManyRequests
		m.observe(obs)
		fields.SetRetryAfter(w.Header(), o.Decision.RetryAfter)
		writeTooMany(w, t.policy)
		return
	case ratelimit.Unavailable:
		m.failClosed(w, obs, ratelimit.KindUnavailable, o.Category, o.RetryAfter)
	case ratelimit.Indeterminate:
		m.failClosed(w, obs, ratelimit.KindIndeterminate, o.Category, o.RetryAfter)
	case ratelimit.Incompatible:
		if o.Category == ratelimit.CategoryDedupConflict && evalID != "" {
			// The client reused its Idempotency-Key for another request
			// (another cost or policy): the draft's 422, nothing charged.
			obs.Status = http.StatusUnprocessableEntity
			m.observe(obs)
			writeKeyReused(w, t.policy)
			return
		}
		m.failClosed(w, obs, ratelimit.KindIncompatible, o.Category, 0)
	default: // nil, or a pointer to an outcome: the port is broken
		m.failClosed(w, obs, ratelimit.KindUnknown, "", 0)
	}
}

// refuseIdentity answers a request whose identity cannot be read (401, 400
// or 500, see subject.ErrorStatus) without asking the port.
func (m *Middleware) refuseIdentity(w http.ResponseWriter, t *target, err error) {
	status := writeIdentityError(w, t.policy, err)
	m.observe(Observation{Policy: t.policy, Status: status})
}

// failClosed answers 503 for an outcome of kind and category without a
// decision.
func (m *Middleware) failClosed(w http.ResponseWriter, obs Observation, kind ratelimit.OutcomeKind, category ratelimit.Category, retryAfter time.Duration) {
	obs.Status = http.StatusServiceUnavailable
	m.observe(obs)
	fields.SetRetryAfter(w.Header(), retryAfter)
	writeUnavailable(w, kind, sanitize(category), obs.Policy)
}

func (m *Middleware) observe(o Observation) {
	if m.observer != nil {
		m.observer.Observe(o)
	}
}

// setDecisionFields writes the RateLimit fields of an evaluated decision
// (package fields owns their syntax). The time to reset is the decision's
// own server-time span, ResetAt - ServerNow, so a skew between this host's
// clock and the coordination server's does not shift it; only a port that
// does not report ServerNow falls back to ResetAt - now on this host's
// clock.
func (m *Middleware) setDecisionFields(h http.Header, t *target, d ratelimit.Decision, now time.Time) {
	reset, ok := d.ResetAfter()
	if !ok {
		reset = d.ResetAt.Sub(now)
	}
	b := fields.Bucket{
		Policy:    string(t.policy),
		Quota:     d.Limit,
		Remaining: d.Remaining,
		Reset:     reset,
		Window:    t.window,
		// A concurrency limit's quota is in flight (ADR 0041).
		Concurrent: m.holding[d.PolicyID],
	}
	if w, ok := m.windows[d.PolicyID]; ok && t.members == nil && d.PolicyID != t.policy {
		// Decided by the policy the subject's plan maps the route's to
		// (issue 36): its quota and window, under the route's name.
		b.Window = w
	}
	if t.members != nil {
		// A policy set: RateLimit is the member that speaks for the set
		// (ratelimit.Deciding), RateLimit-Policy lists every member.
		b.Policy = string(d.PolicyID)
	}
	fields.Set(h, b, m.legacy)
	if t.members != nil {
		h[fields.RateLimitPolicy] = []string{t.policyField}
	}
}

// Observation describes what the middleware answered one request, for
// the HTTP metrics (responses by status, queue delays). It holds no
// subject. What the port answered (outcome kind, category, latency) is not
// in it: that is counted once, on the port, by a decorator (the service's
// app-bootstrap/metrics Edge; ADR 0033).
type Observation struct {
	// Policy is the policy the request was mapped to (for a policy set,
	// its first member).
	Policy ratelimit.PolicyID
	// Admitted is true when the next handler ran.
	Admitted bool
	// Status is what the middleware answered (429, 503, 400, 500), or 0
	// when it passed the request on.
	Status int
	// Delay is how long the request was held for its slot in a
	// leaky-bucket queue (ADR 0028); 0 when it went at once.
	Delay time.Duration
	// Abandoned is true when the request's context ended while it was held:
	// it was not passed on, and its slot was given back when Refunded.
	Abandoned bool
	// Refunded is true when an abandoned request's slot was given back
	// (the port's refund was evaluated); false leaves the charge, which
	// can only under-admit.
	Refunded bool
}

// Observer receives one Observation per rate-limited request, synchronously,
// before the response is written. Implementations must be safe for concurrent
// use and fast (count, do not block).
type Observer interface {
	Observe(Observation)
}

// ObserverFunc adapts a function to Observer.
type ObserverFunc func(Observation)

// Observe calls f(o).
func (f ObserverFunc) Observe(o Observation) { f(o) }
