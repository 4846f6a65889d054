package edge

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/tech-log/tech-log-backend/adapter-inbound-web/subject"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
	"github.com/tech-log/tech-log-backend/shared-contract/route"
)

// Bounds on Config.
const (
	// MaxTimeout is the largest accepted Config.Timeout: the contract's
	// ratelimit.MaxEvaluationTimeout, which the configuration checks.
	MaxTimeout = ratelimit.MaxEvaluationTimeout
	// MaxRoutes bounds Config.Routes plus Config.Exempt.
	MaxRoutes = 1024
)

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

// Config configures the middleware.
type Config struct {
	// Port evaluates requests, the policy sets of routes mapped to several
	// policies and the refund of a held request that left; required.
	Port ratelimit.EdgePort
	// Subjects reads client identities; required. A *subject.Resolver
	// identifies clients by IP (the safe default); see subject.Identifier
	// for verified API keys, a trusted proxy's principal or your own
	// authentication. Its errors are answered as subject.ErrorStatus says
	// (401, 400 or 500) without asking the port.
	Subjects subject.Identifier
	// Pseudonymizer turns identities into digests; required.
	Pseudonymizer *subject.Pseudonymizer
	// DefaultPolicy applies to requests no Route matches; required.
	DefaultPolicy ratelimit.PolicyID
	// Routes map ServeMux patterns to policies. Precedence is ServeMux's:
	// the most specific pattern wins. Conflicting patterns are an error.
	// A pattern given for several policies makes them a policy set (ADR
	// 0027): the request is evaluated against all of them, all or nothing,
	// through Port.EvaluateSet, members in the order given (at most
	// ratelimit.MaxSetMembers, none with a dedup window, all among
	// Policies); the same pattern twice for one policy is an error. A
	// policy that Policies gives as ratelimit.Shadow never joins a set and
	// never decides a request: its patterns are matched in a table of
	// their own, and a request matching one is decided as without it and
	// by the shadow policy besides, which never changes the response (ADR
	// 0037, shadow.go).
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
	// RateLimit-Policy carries the window (w=). The Idempotency-Key header
	// is read only on routes whose policy, given here, has a dedup window.
	// A concurrency limit (ratelimit.Policy.Holds, ADR 0041) must be given
	// here: the edge gives its slots back when the handler returns only
	// for the policies it knows hold; one not given keeps its slots until
	// its maxHold passes.
	Policies []ratelimit.Policy
	// Cost, optional, prices a request; nil means 1.
	Cost CostFunc
	// ShadowMaxInFlight bounds the shadow calls in flight at once (ADR
	// 0037): a shadow call that would exceed it is not made, so that
	// shadow policies never take more of the port's in-flight bound than
	// this; 0 means DefaultShadowMaxInFlight, at most MaxShadowInFlight.
	ShadowMaxInFlight int
	// ShadowSkipped, optional, is told about every shadow call not made
	// because ShadowMaxInFlight were in flight.
	ShadowSkipped func(policy ratelimit.PolicyID)
	// OmitLegacyFields drops RateLimit-Limit, RateLimit-Remaining and
	// RateLimit-Reset (the fields of the drafts up to -06), leaving the
	// RateLimit and RateLimit-Policy pair of the current draft.
	OmitLegacyFields bool
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
	if c.ShadowMaxInFlight < 0 || c.ShadowMaxInFlight > MaxShadowInFlight {
		fail("ShadowMaxInFlight %d is not in 0..%d", c.ShadowMaxInFlight, MaxShadowInFlight)
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
	for _, p := range c.Policies {
		if p.ID() == c.DefaultPolicy && p.Shadow() {
			fail("DefaultPolicy: policy %q is a shadow policy, which never refuses a request: requests no route matches would be unlimited", p.ID())
		}
	}
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
	legacy   bool
	subjects subject.Identifier
	pseudo   *subject.Pseudonymizer
	routes   *route.Table // pattern -> *target; never serves
	// shadowRoutes maps the shadow policies' patterns (pattern ->
	// *shadows; ADR 0037), nil when there are none; never serves.
	shadowRoutes *route.Table
	// shadowSlots holds one token per shadow call in flight, at most
	// Config.ShadowMaxInFlight; nil when there is no shadow route.
	shadowSlots   chan struct{}
	shadowSkipped func(ratelimit.PolicyID)
	deflt         *target
	// windows is each configured policy's window (windowSeconds), for a
	// decision by another policy than the route's (a plan's, issue 36).
	windows map[ratelimit.PolicyID]int64
	// holding is every configured concurrency limit (ADR 0041): a decision
	// by one holds slots.
	holding  map[ratelimit.PolicyID]bool
	timeout  time.Duration
	cost     CostFunc
	observer Observer
	now      func() time.Time
}

// New validates cfg, builds the route table and returns the middleware.
func New(cfg Config) (*Middleware, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	windows := map[ratelimit.PolicyID]int64{}
	dedup := map[ratelimit.PolicyID]bool{}
	policies := map[ratelimit.PolicyID]ratelimit.Policy{}
	holding := map[ratelimit.PolicyID]bool{}
	for _, p := range cfg.Policies {
		if p.Holds() {
			holding[p.ID()] = true
		}
		windows[p.ID()] = windowSeconds(p)
		dedup[p.ID()] = p.DedupWindow() > 0
		policies[p.ID()] = p
	}
	m := &Middleware{
		port:          cfg.Port,
		subjects:      cfg.Subjects,
		pseudo:        cfg.Pseudonymizer,
		routes:        route.NewTable(),
		deflt:         &target{},
		windows:       windows,
		holding:       holding,
		timeout:       cfg.Timeout,
		cost:          cfg.Cost,
		shadowSkipped: cfg.ShadowSkipped,
		observer:      cfg.Observer,
		now:           cfg.Now,
		legacy:        !cfg.OmitLegacyFields,
	}
	if m.now == nil {
		m.now = time.Now
	}
	_, _ = m.addPolicy(m.deflt, cfg.DefaultPolicy, policies, windows, dedup) // a target's first policy: never an error
	var errs []error
	byPattern := map[string]*target{}
	byShadowPattern := map[string]*shadows{}
	for i, r := range cfg.Routes {
		if p, ok := policies[r.Policy]; ok && p.Shadow() {
			if err := m.addShadowRoute(byShadowPattern, r); err != nil {
				errs = append(errs, fmt.Errorf("%w: Routes[%d].%w", ErrInvalidConfig, i, err))
			}
			continue
		}
		if t := byPattern[r.Pattern]; t != nil {
			if field, err := m.addPolicy(t, r.Policy, policies, windows, dedup); err != nil {
				errs = append(errs, fmt.Errorf("%w: Routes[%d].%s: %w", ErrInvalidConfig, i, field, err))
			}
			continue
		}
		t := &target{}
		if field, err := m.addPolicy(t, r.Policy, policies, windows, dedup); err != nil {
			errs = append(errs, fmt.Errorf("%w: Routes[%d].%s: %w", ErrInvalidConfig, i, field, err))
			continue
		}
		if err := m.routes.Handle(r.Pattern, t); err != nil {
			errs = append(errs, fmt.Errorf("%w: Routes[%d].Pattern: %w", ErrInvalidConfig, i, err))
			continue
		}
		byPattern[r.Pattern] = t
	}
	for i, p := range cfg.Exempt {
		if err := m.routes.Handle(p, &target{exempt: true}); err != nil {
			errs = append(errs, fmt.Errorf("%w: Exempt[%d]: %w", ErrInvalidConfig, i, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if m.shadowRoutes != nil {
		n := cfg.ShadowMaxInFlight
		if n == 0 {
			n = DefaultShadowMaxInFlight
		}
		m.shadowSlots = make(chan struct{}, n)
	}
	return m, nil
}

// addShadowRoute maps r, a route of a shadow policy, in the shadow table
// (byPattern: its entries so far, by pattern). The error starts with the
// field at fault.
func (m *Middleware) addShadowRoute(byPattern map[string]*shadows, r Route) error {
	if s := byPattern[r.Pattern]; s != nil {
		if field, err := addShadow(s, r.Policy); err != nil {
			return fmt.Errorf("%s: %w", field, err)
		}
		return nil
	}
	s := &shadows{ids: []ratelimit.PolicyID{r.Policy}}
	if m.shadowRoutes == nil {
		m.shadowRoutes = route.NewTable()
	}
	if err := m.shadowRoutes.Handle(r.Pattern, s); err != nil {
		return fmt.Errorf("Pattern: %w", err)
	}
	byPattern[r.Pattern] = s
	return nil
}
