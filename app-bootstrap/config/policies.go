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
	fail := func(where, format string, args ...any) {
		problems = append(problems, fmt.Errorf("%w: %s: "+format, append([]any{ErrPolicyFile, where}, args...)...))
	}
	var set PolicySet
	ids := map[ratelimit.PolicyID]int{}
	routes := map[string][]ratelimit.PolicyID{}
	byID := map[ratelimit.PolicyID]ratelimit.Policy{}
	patterns := edge.NewPatterns()
	for i, pj := range file.Policies {
		where := fmt.Sprintf("policies[%d]", i)
		if pj.ID != nil {
			where = fmt.Sprintf("policies[%d] (%s)", i, bounded(*pj.ID))
		}
		spec, specProblems := pj.spec()
		for _, p := range specProblems {
			fail(where, "%w", p)
		}
		if len(specProblems) > 0 {
			continue
		}
		if j, dup := ids[spec.ID]; dup {
			fail(where, "id %q is already used by policies[%d]", spec.ID, j)
			continue
		}
		ids[spec.ID] = i
		policy, err := ratelimit.NewPolicy(spec)
		if err != nil {
			// NewPolicy joins one *PolicyError per violation: one line each.
			if j, ok := err.(interface{ Unwrap() []error }); ok {
				for _, e := range j.Unwrap() {
					fail(where, "%w", e)
				}
			} else {
				fail(where, "%w", err)
			}
			continue
		}
		set.Policies = append(set.Policies, policy)
		if pj.DenialCache != nil {
			// Optional: absent means on where the algorithm is exact.
			switch {
			case !*pj.DenialCache:
				set.NoDenialCache = append(set.NoDenialCache, spec.ID)
			case !ratedenial.Exact(policy.Algorithm()):
				fail(where, "denialCache: true, but the denial cache is not exact for %s (docs/programs.md, \"Denial cache\"): remove the field", policy.Algorithm())
			}
		}
		for _, pattern := range pj.Routes {
			if members, seen := routes[pattern]; seen {
				// A policy set (ADR 0027): every policy naming the pattern
				// applies, all or nothing.
				if slices.Contains(members, spec.ID) {
					fail(where, "route %q is already mapped to policy %q", bounded(pattern), spec.ID)
					continue
				}
				if problem := setMemberProblem(members, policy, byID); problem != "" {
					fail(where, "route %q %s", bounded(pattern), problem)
					continue
				}
				routes[pattern] = append(members, spec.ID)
				set.Routes = append(set.Routes, Route{Pattern: pattern, Policy: spec.ID})
				continue
			}
			if err := checkPattern(patterns, pattern); err != nil {
				fail(where, "route %q: %w", bounded(pattern), err)
				continue
			}
			routes[pattern] = []ratelimit.PolicyID{spec.ID}
			set.Routes = append(set.Routes, Route{Pattern: pattern, Policy: spec.ID})
		}
		byID[spec.ID] = policy
	}
	if len(problems) > 0 {
		return PolicySet{}, &PolicyFileError{Problems: problems}
	}
	// Most specific first: within a set, the subject members before the
	// global ones (file order otherwise), the order members in different
	// Redis Cluster slots are decided in.
	sort.SliceStable(set.Routes, func(i, j int) bool {
		return byID[set.Routes[i].Policy].Scope() < byID[set.Routes[j].Policy].Scope()
	})
	return set, nil
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
