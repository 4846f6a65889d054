package config

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/tech-log/tech-log-backend/adapter-inbound-web/edge"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/ratedenial"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// maxPolicyFileLen bounds the policy file.
const maxPolicyFileLen = 1 << 20

// maxPolicies bounds the number of policies in one file.
const maxPolicies = 1024

//go:embed default-policies.json
var defaultPolicies string

// DefaultPoliciesJSON is the embedded example policy file (the same as
// app-bootstrap/examples/policies.json). It is an example only: Load never
// uses it, and enabling the Redis limiter requires
// APP_RATE_LIMIT_POLICIES_FILE.
func DefaultPoliciesJSON() string { return defaultPolicies }

// Route maps a net/http ServeMux pattern to the policy that limits it.
type Route struct {
	Pattern string
	Policy  ratelimit.PolicyID
}

// PolicySet is a parsed policy file: the policies in file order and their
// routes in file order. It is immutable after ParsePolicies.
type PolicySet struct {
	Policies []ratelimit.Policy
	Routes   []Route
	// NoDenialCache lists, in file order, the policies whose file says
	// "denialCache": false (ADR 0022).
	NoDenialCache []ratelimit.PolicyID
}

// Policy returns the policy with id.
func (s PolicySet) Policy(id ratelimit.PolicyID) (ratelimit.Policy, bool) {
	for _, p := range s.Policies {
		if p.ID() == id {
			return p, true
		}
	}
	return ratelimit.Policy{}, false
}

// IDs lists the policy IDs, sorted.
func (s PolicySet) IDs() []string {
	ids := make([]string, 0, len(s.Policies))
	for _, p := range s.Policies {
		ids = append(ids, string(p.ID()))
	}
	sort.Strings(ids)
	return ids
}

// PolicyFileError lists every problem of a policy file, each wrapping
// ErrPolicyFile and naming the policy and field.
type PolicyFileError struct {
	Problems []error
}

func (e *PolicyFileError) Error() string {
	msgs := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		msgs[i] = p.Error()
	}
	return strings.Join(msgs, "\n")
}

// Unwrap exposes the problems to errors.Is and errors.As.
func (e *PolicyFileError) Unwrap() []error { return e.Problems }

func policyFileError(format string, args ...any) error {
	return &PolicyFileError{Problems: []error{fmt.Errorf("%w: "+format, append([]any{ErrPolicyFile}, args...)...)}}
}

// policyFile is the wire form of the policy file (README.md, "Policy file").
type policyFile struct {
	Policies []policyJSON `json:"policies"`
}

// policyJSON is one policy. Pointers tell an absent field from a zero one,
// so that a field of another algorithm and a missing field are both errors.
type policyJSON struct {
	ID                 *string   `json:"id"`
	Revision           *int64    `json:"revision"`
	Algorithm          *string   `json:"algorithm"`
	Limit              *int64    `json:"limit"`
	Window             *duration `json:"window"`
	Capacity           *int64    `json:"capacity"`
	RefillTokens       *int64    `json:"refillTokens"`
	RefillPeriod       *duration `json:"refillPeriod"`
	Rate               *int64    `json:"rate"`
	Period             *duration `json:"period"`
	Burst              *int64    `json:"burst"`
	QueueSize          *int64    `json:"queueSize"`
	DelayAfter         *int64    `json:"delayAfter"`
	MaxDelay           *duration `json:"maxDelay"`
	MaxCost            *int64    `json:"maxCost"`
	CleanupGrace       *duration `json:"cleanupGrace"`
	MaxClockRegression *duration `json:"maxClockRegression"`
	FailurePolicy      *string   `json:"failurePolicy"`
	FallbackInstances  *int64    `json:"fallbackInstances"`
	DedupWindow        *duration `json:"dedupWindow"`
	DedupMaxReplays    *int64    `json:"dedupMaxReplays"`
	DenialCache        *bool     `json:"denialCache"`
	Scope              *string   `json:"scope"`
	Routes             []string  `json:"routes"`
}

// duration is a Go duration string ("1s", "250ms") that must be whole
// milliseconds; it is parsed by spec so that errors name the field.
type duration = string

// parseDuration parses the duration field name, recording a problem.
func parseDuration(name string, s *string, problems *[]error) time.Duration {
	d, err := time.ParseDuration(*s)
	switch {
	case err != nil:
		*problems = append(*problems, fmt.Errorf("%s: %q is not a Go duration such as \"1s\" or \"250ms\"", name, bounded(*s)))
	case d%time.Millisecond != 0:
		*problems = append(*problems, fmt.Errorf("%s: %q is not a whole number of milliseconds", name, *s))
	}
	return d
}

func readPolicyFile(path string) (PolicySet, error) {
	f, err := os.Open(path)
	if err != nil {
		return PolicySet{}, policyFileError("%w", err)
	}
	defer f.Close()
	return ParsePolicies(f)
}

// ParsePolicies reads a policy file strictly: duplicate keys, keys that
// differ from a field name only in case, unknown fields, trailing data,
// fields of another algorithm, durations that are not whole milliseconds,
// duplicate IDs or routes and invalid ServeMux patterns are errors, and
// every policy goes through ratelimit.NewPolicy. The error is a
// *PolicyFileError listing every problem.
func ParsePolicies(r io.Reader) (PolicySet, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxPolicyFileLen+1))
	if err != nil {
		return PolicySet{}, policyFileError("%w", err)
	}
	if len(data) > maxPolicyFileLen {
		return PolicySet{}, policyFileError("larger than %d bytes", maxPolicyFileLen)
	}
	if problems := checkKeys(data); len(problems) > 0 {
		return PolicySet{}, &PolicyFileError{Problems: problems}
	}
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	var file policyFile
	if err := dec.Decode(&file); err != nil {
		return PolicySet{}, policyFileError("%w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return PolicySet{}, policyFileError("trailing data after the top-level object")
	}
	if len(file.Policies) == 0 {
		return PolicySet{}, policyFileError(`"policies" is missing or empty`)
	}
	if len(file.Policies) > maxPolicies {
		return PolicySet{}, policyFileError("%d policies, at most %d", len(file.Policies), maxPolicies)
	}

	var problems []error
	b := newSetBuilder(&problems)
	for i, pj := range file.Policies {
		where := fmt.Sprintf("policies[%d]", i)
		if pj.ID != nil {
			where = fmt.Sprintf("policies[%d] (%s)", i, bounded(*pj.ID))
		}
		spec, specProblems := pj.spec()
		for _, p := range specProblems {
			b.fail(where, "%w", p)
		}
		if len(specProblems) > 0 {
			continue
		}
		b.add(where, PolicyDef{Spec: spec, Routes: pj.Routes, DenialCache: pj.DenialCache})
	}
	return b.finish()
}

// PolicyDef is one policy as a policy file defines it, in Go: the spec
// ratelimit.NewPolicy checks, the ServeMux patterns it limits (a pattern
// named by several policies makes them a policy set, ADR 0027) and the
// optional "denialCache" (nil: on where the algorithm is exact).
type PolicyDef struct {
	Spec        ratelimit.PolicySpec
	Routes      []string
	DenialCache *bool
}

// NewPolicySet checks defs exactly as ParsePolicies checks a policy file
// (every spec through ratelimit.NewPolicy, distinct IDs, valid and
// non-conflicting routes, policy-set members, the queue delay cap, the
// denial-cache flag) and returns them as a PolicySet, routes most specific
// first. Each problem names the policy as defs[i] (id). The error is a
// *PolicyFileError listing every problem. Package ratelimiter (the front
// door) builds its policies here.
func NewPolicySet(defs []PolicyDef) (PolicySet, error) {
	if len(defs) == 0 {
		return PolicySet{}, policyFileError("no policies")
	}
	if len(defs) > maxPolicies {
		return PolicySet{}, policyFileError("%d policies, at most %d", len(defs), maxPolicies)
	}
	var problems []error
	b := newSetBuilder(&problems)
	for i, d := range defs {
		b.add(fmt.Sprintf("policies[%d] (%s)", i, bounded(string(d.Spec.ID))), d)
	}
	return b.finish()
}

// setBuilder is the one place where policies become a PolicySet: the
// policy file (ParsePolicies) and Go definitions (NewPolicySet) both add
// to one, in order, and its problems are the caller's.
type setBuilder struct {
	problems *[]error
	set      PolicySet
	ids      map[ratelimit.PolicyID]string
	routes   map[string][]ratelimit.PolicyID
	byID     map[ratelimit.PolicyID]ratelimit.Policy
	patterns *edge.Patterns
}

func newSetBuilder(problems *[]error) *setBuilder {
	return &setBuilder{
		problems: problems,
		ids:      map[ratelimit.PolicyID]string{},
		routes:   map[string][]ratelimit.PolicyID{},
		byID:     map[ratelimit.PolicyID]ratelimit.Policy{},
		patterns: edge.NewPatterns(),
	}
}

func (b *setBuilder) fail(where, format string, args ...any) {
	*b.problems = append(*b.problems, fmt.Errorf("%w: %s: "+format, append([]any{ErrPolicyFile, where}, args...)...))
}

// add checks one definition and adds it; where names it in problems.
func (b *setBuilder) add(where string, d PolicyDef) {
	spec := d.Spec
	if first, dup := b.ids[spec.ID]; dup {
		b.fail(where, "id %q is already used by %s", spec.ID, first)
		return
	}
	b.ids[spec.ID] = strings.TrimSuffix(where, " ("+bounded(string(spec.ID))+")")
	policy, err := ratelimit.NewPolicy(spec)
	if err != nil {
		// NewPolicy joins one *PolicyError per violation: one line each.
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				b.fail(where, "%w", e)
			}
		} else {
			b.fail(where, "%w", err)
		}
		return
	}
	if _, maxDelay, ok := policy.Queue(); ok && maxDelay > MaxQueueDelay {
		b.fail(where, "maxDelay %v (the longest this queue holds a request) is above %v: the HTTP write timeout must leave the handler time to answer; shorten the queue or raise the rate", maxDelay, MaxQueueDelay)
		return
	}
	b.set.Policies = append(b.set.Policies, policy)
	if d.DenialCache != nil {
		// Optional: absent means on where the algorithm is exact.
		switch {
		case !*d.DenialCache:
			b.set.NoDenialCache = append(b.set.NoDenialCache, spec.ID)
		case !ratedenial.Exact(policy.Algorithm()):
			b.fail(where, "denialCache: true, but the denial cache is not exact for %s (docs/programs.md, \"Denial cache\"): remove the field", policy.Algorithm())
		}
	}
	for _, pattern := range d.Routes {
		if members, seen := b.routes[pattern]; seen {
			// A policy set (ADR 0027): every policy naming the pattern
			// applies, all or nothing.
			if slices.Contains(members, spec.ID) {
				b.fail(where, "route %q is already mapped to policy %q", bounded(pattern), spec.ID)
				continue
			}
			if problem := setMemberProblem(members, policy, b.byID); problem != "" {
				b.fail(where, "route %q %s", bounded(pattern), problem)
				continue
			}
			b.routes[pattern] = append(members, spec.ID)
			b.set.Routes = append(b.set.Routes, Route{Pattern: pattern, Policy: spec.ID})
			continue
		}
		if err := checkPattern(b.patterns, pattern); err != nil {
			b.fail(where, "route %q: %w", bounded(pattern), err)
			continue
		}
		b.routes[pattern] = []ratelimit.PolicyID{spec.ID}
		b.set.Routes = append(b.set.Routes, Route{Pattern: pattern, Policy: spec.ID})
	}
	b.byID[spec.ID] = policy
}

// finish returns the set, or every problem recorded.
func (b *setBuilder) finish() (PolicySet, error) {
	if len(*b.problems) > 0 {
		return PolicySet{}, &PolicyFileError{Problems: *b.problems}
	}
	set := b.set
	// Most specific first: within a set, the subject members before the
	// global ones (file order otherwise), the order members in different
	// Redis Cluster slots are decided in.
	sort.SliceStable(set.Routes, func(i, j int) bool {
		return b.byID[set.Routes[i].Policy].Scope() < b.byID[set.Routes[j].Policy].Scope()
	})
	return set, nil
}

// MaxQueueDelay is the longest maxDelay a leaky_bucket policy may have:
// the edge holds an admitted request up to maxDelay before its handler
// runs, and the service's HTTP write timeout (30 s) must leave the handler
// time to answer (ADR 0028).
const MaxQueueDelay = 20 * time.Second

// leakyBucket is the LeakyBucket of a leaky_bucket policy: delayAfter
// defaults to 0 (every waiter is delayed, nginx's default) and maxDelay to
// the queue's longest delay (the set builder refuses one above
// MaxQueueDelay).
func leakyBucket(p policyJSON, problems *[]error) ratelimit.LeakyBucket {
	q := ratelimit.LeakyBucket{Rate: *p.Rate, Period: parseDuration("period", p.Period, problems), QueueSize: *p.QueueSize}
	if p.DelayAfter != nil {
		q.DelayAfter = *p.DelayAfter
	}
	if p.MaxDelay != nil {
		q.MaxDelay = parseDuration("maxDelay", p.MaxDelay, problems)
	} else {
		q.MaxDelay = q.LongestDelay()
	}
	return q
}

// setMemberProblem says why policy p cannot join the policy set members
// (the policies already naming one route), or "" when it can: a set has at
// most ratelimit.MaxSetMembers members, none of them with a dedup window
// (an Idempotency-Key names one evaluation of one policy) and none a leaky
// bucket (a held request would hold every member's admission).
func setMemberProblem(members []ratelimit.PolicyID, p ratelimit.Policy, byID map[ratelimit.PolicyID]ratelimit.Policy) string {
	if len(members) == ratelimit.MaxSetMembers {
		return fmt.Sprintf("is already named by %d policies, at most %d in one policy set", len(members), ratelimit.MaxSetMembers)
	}
	for _, id := range append([]ratelimit.PolicyID{p.ID()}, members...) {
		pol, ok := byID[id]
		if id == p.ID() {
			pol, ok = p, true
		}
		if ok && pol.DedupWindow() > 0 {
			return fmt.Sprintf("is named by several policies (a policy set) and policy %q has a dedupWindow; a set member cannot have one", id)
		}
		if ok && pol.Algorithm() == ratelimit.AlgorithmLeakyBucket {
			return fmt.Sprintf("is named by several policies (a policy set) and policy %q is a leaky_bucket; a queue cannot be a set member (ADR 0028)", id)
		}
	}
	return ""
}

// checkPattern adds pattern to patterns, the edge's own ServeMux pattern
// check: malformed patterns and ones that conflict with an earlier route are
// errors.
func checkPattern(patterns *edge.Patterns, pattern string) error {
	if strings.TrimSpace(pattern) == "" {
		return errors.New("empty pattern")
	}
	if err := patterns.Add(pattern); err != nil {
		return fmt.Errorf("not a valid ServeMux pattern: %w", err)
	}
	return nil
}

// spec maps the wire policy to a PolicySpec, listing every missing field
// and every field that belongs to another algorithm.
func (p policyJSON) spec() (ratelimit.PolicySpec, []error) {
	var problems []error
	missing := func(name string) { problems = append(problems, fmt.Errorf("%q is required", name)) }
	var spec ratelimit.PolicySpec
	if p.ID == nil {
		missing("id")
	} else {
		spec.ID = ratelimit.PolicyID(*p.ID)
	}
	if p.Revision == nil {
		missing("revision")
	} else {
		spec.Revision = *p.Revision
	}
	if p.MaxCost == nil {
		missing("maxCost")
	} else {
		spec.MaxCost = *p.MaxCost
	}
	if p.CleanupGrace == nil {
		missing("cleanupGrace")
	} else {
		spec.CleanupGrace = parseDuration("cleanupGrace", p.CleanupGrace, &problems)
	}
	if p.MaxClockRegression == nil {
		missing("maxClockRegression")
	} else {
		spec.MaxClockRegression = parseDuration("maxClockRegression", p.MaxClockRegression, &problems)
	}
	if p.FailurePolicy == nil {
		missing("failurePolicy")
	} else if fp, err := ratelimit.ParseFailurePolicy(*p.FailurePolicy); err != nil {
		problems = append(problems, fmt.Errorf("failurePolicy: %w", err))
	} else {
		spec.FailurePolicy = fp
		// "fallbackInstances" belongs to "local-fallback" only; NewPolicy
		// names a missing or a stray one.
		if p.FallbackInstances != nil {
			spec.FallbackInstances = *p.FallbackInstances
		}
	}
	if p.DedupWindow != nil {
		// Optional: absent means no dedup; "0s" is refused, so that a
		// window is either meant or absent.
		spec.DedupWindow = parseDuration("dedupWindow", p.DedupWindow, &problems)
		if spec.DedupWindow == 0 {
			problems = append(problems, fmt.Errorf("dedupWindow: %q must be positive (omit the field for no dedup)", *p.DedupWindow))
		}
	}
	if p.DedupMaxReplays != nil {
		// Optional: absent means ratelimit.DefaultDedupMaxReplays. Without
		// a dedup window it would mean nothing, so it is refused rather
		// than ignored.
		switch n := *p.DedupMaxReplays; {
		case p.DedupWindow == nil:
			problems = append(problems, fmt.Errorf("dedupMaxReplays: %d is set without \"dedupWindow\" (replays exist only with a dedup window; add one or remove the field)", n))
		case n < 0 || n > ratelimit.MaxDedupMaxReplays:
			problems = append(problems, fmt.Errorf("dedupMaxReplays: %d is not an integer 0..%d", n, ratelimit.MaxDedupMaxReplays))
		default:
			spec.DedupMaxReplays = &n
		}
	}
	if p.Scope != nil {
		// Optional: absent means "subject" (ADR 0027).
		if sc, err := ratelimit.ParseScope(*p.Scope); err != nil {
			problems = append(problems, fmt.Errorf("scope: %w", err))
		} else {
			spec.Scope = sc
		}
	}
	if p.Algorithm == nil {
		missing("algorithm")
		return spec, problems
	}
	alg, err := ratelimit.ParseAlgorithm(*p.Algorithm)
	if err != nil {
		problems = append(problems, fmt.Errorf("algorithm: %w", err))
		return spec, problems
	}
	spec.Algorithm = alg
	present := map[string]bool{
		"limit": p.Limit != nil, "window": p.Window != nil,
		"capacity": p.Capacity != nil, "refillTokens": p.RefillTokens != nil, "refillPeriod": p.RefillPeriod != nil,
		"rate": p.Rate != nil, "period": p.Period != nil, "burst": p.Burst != nil,
		"queueSize": p.QueueSize != nil, "delayAfter": p.DelayAfter != nil, "maxDelay": p.MaxDelay != nil,
	}
	// optional are fields of alg that may be left out (leaky bucket:
	// delayAfter 0, maxDelay the queue's longest delay).
	var optional []string
	var own []string
	switch alg {
	case ratelimit.AlgorithmFixedWindow, ratelimit.AlgorithmSlidingWindowCounter, ratelimit.AlgorithmSlidingLog:
		// The sliding log's limit is capped (ratelimit.MaxSlidingLogLimit,
		// ADR 0024): NewPolicy names a larger one.
		own = []string{"limit", "window"}
	case ratelimit.AlgorithmTokenBucket:
		own = []string{"capacity", "refillTokens", "refillPeriod"}
	case ratelimit.AlgorithmGCRA:
		// redis_rate.Limit{Rate, Burst, Period} (ADR 0021).
		own = []string{"rate", "period", "burst"}
	case ratelimit.AlgorithmLeakyBucket:
		// nginx's limit_req rate, burst and delay= (ADR 0028).
		own, optional = []string{"rate", "period", "queueSize"}, []string{"delayAfter", "maxDelay"}
	}
	mine := map[string]bool{}
	for _, f := range own {
		mine[f] = true
		if !present[f] {
			missing(f)
		}
	}
	for _, f := range optional {
		mine[f] = true
	}
	for _, f := range []string{"limit", "window", "capacity", "refillTokens", "refillPeriod", "rate", "period", "burst", "queueSize", "delayAfter", "maxDelay"} {
		if present[f] && !mine[f] {
			problems = append(problems, fmt.Errorf("%q is not a parameter of %s", f, alg))
		}
	}
	if len(problems) > 0 {
		return spec, problems
	}
	switch alg {
	case ratelimit.AlgorithmFixedWindow:
		spec.Params = ratelimit.FixedWindow{Limit: *p.Limit, Window: parseDuration("window", p.Window, &problems)}
	case ratelimit.AlgorithmSlidingWindowCounter:
		spec.Params = ratelimit.SlidingWindowCounter{Limit: *p.Limit, Window: parseDuration("window", p.Window, &problems)}
	case ratelimit.AlgorithmTokenBucket:
		spec.Params = ratelimit.TokenBucket{Capacity: *p.Capacity, RefillTokens: *p.RefillTokens, RefillPeriod: parseDuration("refillPeriod", p.RefillPeriod, &problems)}
	case ratelimit.AlgorithmGCRA:
		spec.Params = ratelimit.GCRA{Rate: *p.Rate, Period: parseDuration("period", p.Period, &problems), Burst: *p.Burst}
	case ratelimit.AlgorithmSlidingLog:
		spec.Params = ratelimit.SlidingLog{Limit: *p.Limit, Window: parseDuration("window", p.Window, &problems)}
	case ratelimit.AlgorithmLeakyBucket:
		spec.Params = leakyBucket(p, &problems)
	}
	return spec, problems
}
