package ratelimit

import (
	"errors"
	"fmt"
)

// ErrSetMemberRepeats is wrapped by the error of a set in which two
// members name the same policy for the same subject (Validate) or the same
// scoped subject (ValidateScoped): the set program reads every member's
// state before it writes any, so one key twice would be admitted twice.
var ErrSetMemberRepeats = errors.New("a policy repeats for the same subject")

// validatePerMember checks the subjects and costs of r's members (per
// member when Subjects or Costs is set, else the set's one) and that no
// two members name the same policy for the same subject.
func (r SetRequest) validatePerMember() []error {
	var errs []error
	if r.Subjects == nil {
		if err := r.SubjectDigest.Validate(); err != nil {
			errs = append(errs, requestError("SubjectDigest", err))
		}
	} else {
		if len(r.Subjects) != len(r.Members) {
			errs = append(errs, requestError("Subjects", fmt.Errorf("%w: %d subjects for %d members", ErrSetMembers, len(r.Subjects), len(r.Members))))
		}
		for i, d := range r.Subjects {
			if err := d.Validate(); err != nil {
				errs = append(errs, requestError(fmt.Sprintf("Subjects[%d]", i), err))
			}
		}
	}
	if r.Costs == nil {
		errs = append(errs, checkCost("Cost", r.Cost)...)
	} else {
		if len(r.Costs) != len(r.Members) {
			errs = append(errs, requestError("Costs", fmt.Errorf("%w: %d costs for %d members", ErrSetMembers, len(r.Costs), len(r.Members))))
		}
		for i, c := range r.Costs {
			errs = append(errs, checkCost(fmt.Sprintf("Costs[%d]", i), c)...)
		}
	}
	for i := range r.Members {
		m := r.Member(i)
		for j := range i {
			if prev := r.Member(j); prev.PolicyID == m.PolicyID && prev.SubjectDigest == m.SubjectDigest {
				errs = append(errs, requestError(fmt.Sprintf("Members[%d]", i),
					fmt.Errorf("%w: %w: %q as Members[%d]", ErrSetMembers, ErrSetMemberRepeats, m.PolicyID, j)))
				break
			}
		}
	}
	return errs
}

// checkCost is the error of a cost outside 1..MaxExactInt, naming field.
func checkCost(field string, cost int64) []error {
	if cost < 1 || cost > MaxExactInt {
		return []error{requestError(field, fmt.Errorf("%w: %d not in 1..%d", ErrCostOutOfRange, cost, MaxExactInt))}
	}
	return nil
}

// ValidateScoped checks, for a valid r whose member i is counted by
// policies[i], that no two members name the same policy for the same
// scoped subject (Policy.Subject: every subject of a ScopeGlobal policy is
// GlobalSubject), which Validate cannot see. Every EdgePort calls it
// before deciding a set; the error wraps ErrInvalidRequest and
// ErrSetMemberRepeats and never contains a subject digest.
func (r SetRequest) ValidateScoped(policies []Policy) error {
	if len(policies) != len(r.Members) {
		return requestError("Members", fmt.Errorf("%w: %d policies for %d members", ErrSetMembers, len(policies), len(r.Members)))
	}
	for i, p := range policies {
		m := r.Member(i)
		for j := range i {
			if prev := r.Member(j); prev.PolicyID == m.PolicyID && p.Subject(m.SubjectDigest) == policies[j].Subject(prev.SubjectDigest) {
				return requestError(fmt.Sprintf("Members[%d]", i),
					fmt.Errorf("%w: %w: %q as Members[%d] under scope %s", ErrSetMembers, ErrSetMemberRepeats, m.PolicyID, j, p.Scope()))
			}
		}
	}
	return nil
}

// subjectLens is the length of every member's subject digest, for String
// and LogValue.
func (r SetRequest) subjectLens() []int {
	lens := make([]int, len(r.Subjects))
	for i, d := range r.Subjects {
		lens[i] = len(d)
	}
	return lens
}
