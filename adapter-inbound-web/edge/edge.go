package edge

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/tech-log/tech-log-backend/adapter-inbound-web/subject"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// Bounds on Config.
const (
	// MaxTimeout is the largest accepted Config.Timeout.
	MaxTimeout = time.Minute
	// MaxRoutes bounds Config.Routes plus Config.Exempt.
	MaxRoutes = 1024
)

// KindUnknown is the outcome kind reported (in the problem body and to the
// Observer) when the port returned nil or a value that is not one of the four
// ratelimit outcome types. Such a request fails closed.
const KindUnknown ratelimit.OutcomeKind = "unknown"

// ErrInvalidConfig is wrapped by every Config.Validate error.
var ErrInvalidConfig = errors.New("invalid edge middleware config")

// Route maps a net/http ServeMux pattern (for example "POST /api/v1/login" or
// "GET /api/") to a policy.
type Route struct {
	Pattern string
	Policy  ratelimit.PolicyID
}

// CostFunc returns the cost of a request under policy; it must be at least 1
// and at most the policy's MaxCost, or the port answers Unavailable
// (invalid_request) and the request fails closed.
type CostFunc func(r *http.Request, policy ratelimit.PolicyID) int64

// Observation describes one request the middleware handled, for metrics. It
// holds no subject.
type Observation struct {
	// Policy is the policy the request was mapped to.
	Policy ratelimit.PolicyID
	// Kind is the outcome kind, KindUnknown for a nil or foreign outcome,
	// and "" when the port was not called (the identity could not be read).
	Kind ratelimit.OutcomeKind
	// Category is the failed outcome's category ("" for Evaluated).
	Category ratelimit.Category
	// Admitted is true when the next handler ran.
	Admitted bool
	// Status is what the middleware answered (429, 503, 400, 500), or 0
	// when it passed the request on.
	Status int
	// Latency is the time spent in EdgePort.Evaluate (0 if not called).
	Latency time.Duration
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

// Config configures the middleware.
type Config struct {
	// Port evaluates requests; required.
	Port ratelimit.EdgePort
	// Subjects reads client identities; required. A *subject.Resolver
	// identifies clients by IP; see subject.Identifier for the others.
	Subjects subject.Identifier
	// Pseudonymizer turns identities into digests; required.
	Pseudonymizer *subject.Pseudonymizer
	// DefaultPolicy applies to requests no Route matches; required.
	DefaultPolicy ratelimit.PolicyID
	// Routes map ServeMux patterns to policies. Precedence is ServeMux's:
	// the most specific pattern wins. Two identical or conflicting
	// patterns are an error.
	Routes []Route
	// Exempt patterns bypass the limiter (for example "GET /healthz").
	// They take part in the same precedence as Routes.
	Exempt []string
	// Timeout bounds each evaluation: the request deadline is the earlier
	// of the request context's deadline and now+Timeout. 0 < Timeout <=
	// MaxTimeout.
	Timeout time.Duration
	// Policies, optional, are the policies the port enforces; when given,
	// every route's policy and DefaultPolicy must be among them, and
	// RateLimit-Policy carries the window (w=).
	Policies []ratelimit.Policy
	// Cost, optional, prices a request; nil means 1.
	Cost CostFunc
	// Observer, optional, is told about every request.
	Observer Observer
	// Now, optional, is the clock (time.Now when nil).
	Now func() time.Time
}

// Validate reports every invalid field, joined; each error wraps
// ErrInvalidConfig and names the field. Pattern syntax and conflicts are
// checked by New, which builds the route table.
func (c Config) Validate() error {
	var errs []error
	fail := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...))
	}
	if c.Port == nil {
		fail("Port is required")
	}
	if c.Subjects == nil {
		fail("Subjects is required")
	}
	if c.Pseudonymizer == nil {
		fail("Pseudonymizer is required")
	}
	known := map[ratelimit.PolicyID]bool{}
	for i, p := range c.Policies {
		if p.IsZero() {
			fail("Policies[%d] was not built by ratelimit.NewPolicy", i)
			continue
		}
		if known[p.ID()] {
			fail("Policies[%d]: duplicate policy %q", i, p.ID())
		}
		known[p.ID()] = true
	}
	checkPolicy := func(field string, id ratelimit.PolicyID) {
		if err := id.Validate(); err != nil {
			fail("%s: %w", field, err)
			return
		}
		if len(c.Policies) > 0 && !known[id] {
			fail("%s: policy %q is not among Policies", field, id)
		}
	}
	checkPolicy("DefaultPolicy", c.DefaultPolicy)
	if len(c.Routes)+len(c.Exempt) > MaxRoutes {
		fail("Routes and Exempt have %d patterns, max %d", len(c.Routes)+len(c.Exempt), MaxRoutes)
	}
	for i, r := range c.Routes {
		if r.Pattern == "" {
			fail("Routes[%d].Pattern is empty", i)
		}
		checkPolicy(fmt.Sprintf("Routes[%d].Policy", i), r.Policy)
	}
	for i, p := range c.Exempt {
		if p == "" {
			fail("Exempt[%d] is empty", i)
		}
	}
	if c.Timeout <= 0 || c.Timeout > MaxTimeout {
		fail("Timeout %v not in (0, %v]", c.Timeout, MaxTimeout)
	}
	return errors.Join(errs...)
}

// Middleware enforces edge policies in front of a handler. It is immutable
// and safe for concurrent use; build it with New.
type Middleware struct {
	port     ratelimit.EdgePort
	subjects subject.Identifier
	pseudo   *subject.Pseudonymizer
	routes   *http.ServeMux // pattern -> *target; never serves
	deflt    *target
	timeout  time.Duration
	cost     CostFunc
	observer Observer
	now      func() time.Time
}

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

// New validates cfg, builds the route table and returns the middleware.
func New(cfg Config) (*Middleware, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	windows := map[ratelimit.PolicyID]int64{}
	for _, p := range cfg.Policies {
		windows[p.ID()] = windowSeconds(p)
	}
	m := &Middleware{
		port:     cfg.Port,
		subjects: cfg.Subjects,
		pseudo:   cfg.Pseudonymizer,
		routes:   http.NewServeMux(),
		deflt:    &target{policy: cfg.DefaultPolicy, window: windows[cfg.DefaultPolicy]},
		timeout:  cfg.Timeout,
		cost:     cfg.Cost,
		observer: cfg.Observer,
		now:      cfg.Now,
	}
	if m.now == nil {
		m.now = time.Now
	}
	var errs []error
	for i, r := range cfg.Routes {
		t := &target{policy: r.Policy, window: windows[r.Policy]}
		if err := register(m.routes, r.Pattern, t); err != nil {
			errs = append(errs, fmt.Errorf("%w: Routes[%d].Pattern: %w", ErrInvalidConfig, i, err))
		}
	}
	for i, p := range cfg.Exempt {
		if err := register(m.routes, p, &target{exempt: true}); err != nil {
			errs = append(errs, fmt.Errorf("%w: Exempt[%d]: %w", ErrInvalidConfig, i, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return m, nil
}

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

// windowSeconds is the policy window in whole seconds (ceiling, at least 1):
// the window of fixed and sliding windows, the time a token bucket takes to
// refill from empty to full.
func windowSeconds(p ratelimit.Policy) int64 {
	var d float64 // seconds
	switch q := p.Params().(type) {
	case ratelimit.FixedWindow:
		d = q.Window.Seconds()
	case ratelimit.SlidingWindowCounter:
		d = q.Window.Seconds()
	case ratelimit.TokenBucket:
		d = float64(q.Capacity) / float64(q.RefillTokens) * q.RefillPeriod.Seconds()
	default:
		return 0
	}
	return max(int64(math.Ceil(d)), 1)
}

// PolicyFor returns the policy r is mapped to, and false when r matches an
// Exempt pattern. Requests that match no Route, including ones ServeMux would
// redirect or answer 405, get DefaultPolicy.
func (m *Middleware) PolicyFor(r *http.Request) (ratelimit.PolicyID, bool) {
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

// Wrap returns next behind the middleware.
func (m *Middleware) Wrap(next http.Handler) http.Handler {
	if next == nil {
		panic("edge: Wrap with a nil next handler")
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.serve(w, r, next)
	})
}

func (m *Middleware) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	t := m.targetFor(r)
	if t.exempt {
		next.ServeHTTP(w, r)
		return
	}
	id, err := m.subjects.Identify(r)
	if err != nil {
		status := http.StatusBadRequest
		title := "invalid client identity"
		if errors.Is(err, subject.ErrNoClientAddress) {
			status, title = http.StatusInternalServerError, "client address unavailable"
		}
		m.observe(Observation{Policy: t.policy, Status: status})
		writeProblem(w, problem{Type: "about:blank", Title: title, Status: status, Policy: t.policy})
		return
	}
	digest, err := m.pseudo.Digest(id)
	if err != nil {
		m.observe(Observation{Policy: t.policy, Status: http.StatusInternalServerError})
		writeProblem(w, problem{Type: "about:blank", Title: "internal server error", Status: http.StatusInternalServerError, Policy: t.policy})
		return
	}
	cost := int64(1)
	if m.cost != nil {
		cost = m.cost(r, t.policy)
	}
	now := m.now()
	deadline := now.Add(m.timeout)
	if d, ok := r.Context().Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	req := ratelimit.Request{PolicyID: t.policy, SubjectDigest: digest, Cost: cost, Deadline: deadline}

	start := time.Now()
	out := m.port.Evaluate(r.Context(), req)
	latency := time.Since(start)

	obs := Observation{Policy: t.policy, Latency: latency}
	switch o := out.(type) {
	case ratelimit.Evaluated:
		obs.Kind = ratelimit.KindEvaluated
		setDecisionFields(w.Header(), t, o.Decision, now)
		if ratelimit.Admitted(out) {
			obs.Admitted = true
			m.observe(obs)
			next.ServeHTTP(w, r)
			return
		}
		obs.Status = http.StatusTooManyRequests
		m.observe(obs)
		w.Header().Set("Retry-After", strconv.FormatInt(retryAfterSeconds(o.Decision.RetryAfter), 10))
		writeProblem(w, problem{Type: "about:blank", Title: "too many requests", Status: http.StatusTooManyRequests, Policy: t.policy})
		return
	case ratelimit.Unavailable:
		obs.Kind, obs.Category = ratelimit.KindUnavailable, o.Category
		m.failClosed(w, obs, o.RetryAfter)
	case ratelimit.Indeterminate:
		obs.Kind, obs.Category = ratelimit.KindIndeterminate, o.Category
		m.failClosed(w, obs, o.RetryAfter)
	case ratelimit.Incompatible:
		obs.Kind, obs.Category = ratelimit.KindIncompatible, o.Category
		m.failClosed(w, obs, 0)
	default: // nil, or a pointer to an outcome: the port is broken
		obs.Kind = KindUnknown
		m.failClosed(w, obs, 0)
	}
}

func (m *Middleware) failClosed(w http.ResponseWriter, obs Observation, retryAfter time.Duration) {
	obs.Category = sanitize(obs.Category)
	obs.Status = http.StatusServiceUnavailable
	m.observe(obs)
	w.Header().Set("Retry-After", strconv.FormatInt(retryAfterSeconds(retryAfter), 10))
	writeProblem(w, problem{
		Type:     "about:blank",
		Title:    "rate limiter unavailable",
		Status:   http.StatusServiceUnavailable,
		Outcome:  obs.Kind,
		Category: obs.Category,
		Policy:   obs.Policy,
	})
}

func (m *Middleware) observe(o Observation) {
	if m.observer != nil {
		m.observer.Observe(o)
	}
}

// The RateLimit-* field names in canonical form (header names are
// case-insensitive; Go writes them like this), so that setting them does not
// canonicalize per request.
const (
	headerLimit     = "Ratelimit-Limit"
	headerRemaining = "Ratelimit-Remaining"
	headerReset     = "Ratelimit-Reset"
	headerPolicy    = "Ratelimit-Policy"
)

// setDecisionFields writes the RateLimit-* fields of an evaluated decision.
// The four values share one string and one slice (two allocations).
func setDecisionFields(h http.Header, t *target, d ratelimit.Decision, now time.Time) {
	limit := max(d.Limit, 0)
	remaining := min(max(d.Remaining, 0), limit)
	var buf [192]byte
	var ends [4]int
	b := strconv.AppendInt(buf[:0], limit, 10)
	ends[0] = len(b)
	b = strconv.AppendInt(b, remaining, 10)
	ends[1] = len(b)
	b = strconv.AppendInt(b, resetSeconds(d.ResetAt.Sub(now)), 10)
	ends[2] = len(b)
	b = append(b, '"')
	b = append(b, t.policy...)
	b = append(b, `";q=`...)
	b = strconv.AppendInt(b, limit, 10)
	if t.window > 0 {
		b = append(b, ";w="...)
		b = strconv.AppendInt(b, t.window, 10)
	}
	ends[3] = len(b)
	all := string(b)
	vals := []string{all[:ends[0]], all[ends[0]:ends[1]], all[ends[1]:ends[2]], all[ends[2]:ends[3]]}
	h[headerLimit] = vals[0:1:1]
	h[headerRemaining] = vals[1:2:2]
	h[headerReset] = vals[2:3:3]
	h[headerPolicy] = vals[3:4:4]
}

// ceilSeconds is d in whole seconds rounded up; 0 for d <= 0.
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	s := int64(d / time.Second)
	if d%time.Second != 0 {
		s++
	}
	return s
}

// resetSeconds is RateLimit-Reset: the ceiling of d in seconds, at least 0.
func resetSeconds(d time.Duration) int64 { return ceilSeconds(d) }

// retryAfterSeconds is Retry-After: the ceiling of d in seconds, at least 1
// (a client told 0 would retry at once into the same answer).
func retryAfterSeconds(d time.Duration) int64 { return max(ceilSeconds(d), 1) }

// sanitize keeps a category only if it looks like one ([a-z0-9_], at most
// 64 bytes): a broken port must not get arbitrary text into a response.
func sanitize(c ratelimit.Category) ratelimit.Category {
	if len(c) > 64 {
		return "unknown"
	}
	for i := 0; i < len(c); i++ {
		ch := c[i]
		if !(ch >= 'a' && ch <= 'z' || ch >= '0' && ch <= '9' || ch == '_') {
			return "unknown"
		}
	}
	return c
}

// problem is an RFC 9457 problem body with the rate-limit extensions.
type problem struct {
	Type     string                `json:"type"`
	Title    string                `json:"title"`
	Status   int                   `json:"status"`
	Outcome  ratelimit.OutcomeKind `json:"outcome,omitempty"`
	Category ratelimit.Category    `json:"category,omitempty"`
	Policy   ratelimit.PolicyID    `json:"policy,omitempty"`
}

func writeProblem(w http.ResponseWriter, p problem) {
	body, err := json.Marshal(p)
	if err != nil { // cannot happen: every field is a string or an int
		body = []byte(`{"type":"about:blank","status":` + strconv.Itoa(p.Status) + `}`)
	}
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(p.Status)
	_, _ = w.Write(body)
}
