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

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
	"github.com/tech-log/tech-log-backend/shared-contract/route"
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
	// Plans are the file's plans (its "plans" and "defaultPlan"); the zero
	// Plans when it has none: every policy decides as it is.
	Plans ratelimit.Plans
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
	b.plans(file.Plans, file.DefaultPlan)
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
	patterns *route.Table
}

func newSetBuilder(problems *[]error) *setBuilder {
	return &setBuilder{
		problems: problems,
		ids:      map[ratelimit.PolicyID]string{},
		routes:   map[string][]ratelimit.PolicyID{},
		byID:     map[ratelimit.PolicyID]ratelimit.Policy{},
		patterns: route.NewTable(),
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
	if policy.Holds() && time.Duration(policy.WindowMillis())*time.Millisecond > MaxHold {
		b.fail(where, "maxHold %v is above %v, the HTTP write timeout: a slot would outlive every request that could hold it", time.Duration(policy.WindowMillis())*time.Millisecond, MaxHold)
		return
	}
	b.set.Policies = append(b.set.Policies, policy)
	alg, _ := policy.Algorithm().Spec()
	if d.DenialCache != nil {
		// Optional: absent means on where the algorithm is exact.
		switch {
		case !*d.DenialCache:
			b.set.NoDenialCache = append(b.set.NoDenialCache, spec.ID)
		case !alg.DenialCacheExact:
			b.fail(where, "denialCache: true, but the denial cache is not exact for %s (docs/programs.md, \"Denial cache\"): remove the field", policy.Algorithm())
		}
	}
	for _, pattern := range d.Routes {
		if members, seen := b.routes[pattern]; seen {
			// A policy set (ADR 0027): every enforced policy naming the
			// pattern applies, all or nothing; a shadow one is decided on
			// its own beside them (ADR 0037).
			if slices.Contains(members, spec.ID) {
				b.fail(where, "route %q is already mapped to policy %q", bounded(pattern), spec.ID)
				continue
			}
			if problem := b.memberProblem(members, policy); problem != "" {
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

// memberProblem says why policy p cannot name a route that members (the
// policies already naming it) name, or "" when it can: a shadow policy
// never joins their set, so only the number of shadow policies on one
// route is bounded (ratelimit.MaxSetMembers, as a set's members are); an
// enforced one joins the enforced members' set (setMemberProblem).
func (b *setBuilder) memberProblem(members []ratelimit.PolicyID, p ratelimit.Policy) string {
	var enforced, shadows []ratelimit.PolicyID
	for _, id := range members {
		if b.byID[id].Shadow() {
			shadows = append(shadows, id)
		} else {
			enforced = append(enforced, id)
		}
	}
	if p.Shadow() {
		if len(shadows) == ratelimit.MaxSetMembers {
			return fmt.Sprintf("is already named by %d shadow policies, at most %d on one route", len(shadows), ratelimit.MaxSetMembers)
		}
		return ""
	}
	return setMemberProblem(enforced, p, b.byID)
}

// setMemberProblem says why policy p cannot join the policy set members
// (the policies already naming one route), or "" when it can: a set has at
// most ratelimit.MaxSetMembers members, each of which may join a set
// (ratelimit.CanJoinSet: no dedup window, no algorithm whose spec says it
// cannot be a member, AlgorithmSpec.NoSetMember).
func setMemberProblem(members []ratelimit.PolicyID, p ratelimit.Policy, byID map[ratelimit.PolicyID]ratelimit.Policy) string {
	if len(members) == ratelimit.MaxSetMembers {
		return fmt.Sprintf("is already named by %d policies, at most %d in one policy set", len(members), ratelimit.MaxSetMembers)
	}
	for _, id := range append([]ratelimit.PolicyID{p.ID()}, members...) {
		pol, ok := byID[id]
		if id == p.ID() {
			pol, ok = p, true
		}
		if !ok {
			continue
		}
		// The contract's rule; the policy file's spelling of its reasons.
		switch err := ratelimit.CanJoinSet(pol); {
		case errors.Is(err, ratelimit.ErrSetMemberDedup):
			return fmt.Sprintf("is named by several policies (a policy set) and policy %q has a dedupWindow; a set member cannot have one", id)
		case errors.Is(err, ratelimit.ErrSetMemberQueue):
			alg, _ := pol.Algorithm().Spec()
			return fmt.Sprintf("is named by several policies (a policy set) and policy %q is a %s; %s", id, alg.Name, alg.NoSetMember)
		}
	}
	return ""
}

// checkPattern adds pattern to patterns, the contract's route grammar the
// edge's route table follows too: malformed patterns and ones that
// conflict with an earlier route are errors.
func checkPattern(patterns *route.Table, pattern string) error {
	if strings.TrimSpace(pattern) == "" {
		return errors.New("empty pattern")
	}
	if err := patterns.Add(pattern); err != nil {
		return fmt.Errorf("not a valid ServeMux pattern: %w", err)
	}
	return nil
}
