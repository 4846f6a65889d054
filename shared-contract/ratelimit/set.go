package ratelimit

import (
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Scope is whose budget a policy counts (ADR 0027).
type Scope int

// The scopes. The zero value is ScopeSubject.
const (
	// ScopeSubject gives every subject its own budget (the default).
	ScopeSubject Scope = iota
	// ScopeGlobal gives all subjects together one budget: every request
	// of the policy's routes, whoever sends it, counts against it.
	ScopeGlobal
)

// String returns the policy-file spelling: "subject" or "global".
func (s Scope) String() string {
	switch s {
	case ScopeSubject:
		return "subject"
	case ScopeGlobal:
		return "global"
	}
	return fmt.Sprintf("Scope(%d)", int(s))
}

// ErrInvalidScope is wrapped by ParseScope's error.
var ErrInvalidScope = errors.New("invalid scope")

// ParseScope parses the policy-file spelling of a Scope.
func ParseScope(s string) (Scope, error) {
	switch s {
	case "subject":
		return ScopeSubject, nil
	case "global":
		return ScopeGlobal, nil
	}
	return 0, fmt.Errorf("%w: %q is not \"subject\" or \"global\"", ErrInvalidScope, bounded(s))
}

// GlobalSubject is the subject every request of a ScopeGlobal policy is
// counted under (Policy.Subject): a fixed, valid SubjectDigest shorter than
// any digest the edge's pseudonymizer produces, so that no client's digest
// names the global budget.
const GlobalSubject SubjectDigest = "_global_scope___"

// ScopedTo returns r counted as p counts it: its SubjectDigest replaced by
// p.Subject's (GlobalSubject for a ScopeGlobal policy). It is how every
// layer that keys state, cache entries or local tables by subject applies
// the scope rule (ADR 0027, ADR 0033); the rule itself is Policy.Subject.
func (r Request) ScopedTo(p Policy) Request {
	r.SubjectDigest = p.Subject(r.SubjectDigest)
	return r
}

// MaxSetMembers bounds SetRequest.Members: a set is decided in at most
// that many program calls, and its reply and RateLimit-Policy field stay
// small.
const MaxSetMembers = 8

// SetRequest asks for Cost units of every policy in Members on behalf of
// SubjectDigest, all or nothing; Subjects and Costs, when set, give each
// member a subject and a cost of its own (Envoy's descriptors: Member(i)
// is member i's request). The zero value is invalid. Printing it never
// shows a subject digest.
type SetRequest struct {
	// Members are 1..MaxSetMembers policy IDs, most specific first: the
	// order members in different slots are decided in. An ID may repeat
	// only with another subject (no two members count the same policy
	// under the same subject).
	Members []PolicyID
	// SubjectDigest is the pseudonymized subject of every member when
	// Subjects is nil (ScopeGlobal members count it under GlobalSubject).
	SubjectDigest SubjectDigest
	// Subjects, when not nil, is each member's subject, exactly one per
	// member; SubjectDigest is then not used.
	Subjects []SubjectDigest
	// Cost is taken from every member when Costs is nil: 1..each
	// member's MaxCost.
	Cost int64
	// Costs, when not nil, is each member's cost, exactly one per member,
	// each 1..its member's MaxCost; Cost is then not used.
	Costs []int64
	// Deadline is required, as Request.Deadline: one deadline for the
	// whole set.
	Deadline time.Time
}

// Why a policy cannot be a policy-set member, wrapped by CanJoinSet's error.
var (
	// ErrSetMemberDedup: a member cannot have a dedup window (an evaluation
	// ID names one evaluation of one policy; a set has none).
	ErrSetMemberDedup = errors.New("a policy-set member cannot have a dedup window")
	// ErrSetMemberQueue: a member cannot be a queue (a leaky bucket): a held
	// request would hold every member's admission (ADR 0028).
	ErrSetMemberQueue = errors.New("a queue (leaky bucket) cannot be a policy-set member")
	// ErrSetMemberShadow: a shadow policy is never a member (ADR 0037): it
	// is decided on its own beside the set, so that its denial never
	// refuses the set. Providers do not ask it (they ignore Enforcement).
	ErrSetMemberShadow = errors.New("a shadow policy cannot be a policy-set member")
)

// CanJoinSet is the one rule of which policy may be a policy-set member
// (ADR 0027, ADR 0028, ADR 0037): nil when p may, otherwise an error
// naming p and wrapping ErrSetMemberDedup, ErrSetMemberQueue or
// ErrSetMemberShadow. The policy file, the
// edge's route table and the provider all ask it; how many members a set
// has and that none repeats is SetRequest.Validate's (MaxSetMembers).
func CanJoinSet(p Policy) error {
	var errs []error
	if p.DedupWindow() > 0 {
		errs = append(errs, fmt.Errorf("policy %q: %w", p.ID(), ErrSetMemberDedup))
	}
	if s, ok := p.Algorithm().Spec(); ok && s.NoSetMember != "" {
		errs = append(errs, fmt.Errorf("policy %q: %w: %s", p.ID(), ErrSetMemberQueue, s.NoSetMember))
	}
	if p.Shadow() {
		errs = append(errs, fmt.Errorf("policy %q: %w", p.ID(), ErrSetMemberShadow))
	}
	return errors.Join(errs...)
}

// ErrSetMembers is wrapped by SetRequest.Validate's error about Members.
var ErrSetMembers = errors.New("invalid set members")

// Validate checks what Request.Validate checks for every member (each of
// Subjects and Costs as a Request's subject and cost, the error naming
// the field and its index), the member count (1..MaxSetMembers), that
// Subjects and Costs have one entry per member, and that no two members
// name the same policy for the same subject. Errors wrap
// ErrInvalidRequest and never contain a subject digest. ValidateScoped
// checks the same rule under the members' scopes.
func (r SetRequest) Validate() error {
	var errs []error
	switch n := len(r.Members); {
	case n == 0:
		errs = append(errs, requestError("Members", fmt.Errorf("%w: none", ErrSetMembers)))
	case n > MaxSetMembers:
		errs = append(errs, requestError("Members", fmt.Errorf("%w: %d, at most %d", ErrSetMembers, n, MaxSetMembers)))
	}
	for i, id := range r.Members {
		if err := id.Validate(); err != nil {
			errs = append(errs, requestError(fmt.Sprintf("Members[%d]", i), err))
		}
	}
	errs = append(errs, r.validatePerMember()...)
	if r.Deadline.IsZero() {
		errs = append(errs, requestError("Deadline", ErrDeadlineMissing))
	}
	return errors.Join(errs...)
}

// FirstMember is Members[0], the most specific member; "" for none.
func (r SetRequest) FirstMember() PolicyID {
	if len(r.Members) == 0 {
		return ""
	}
	return r.Members[0]
}

// Member is the single-policy Request of member i: Members[i] with its
// subject (Subjects[i], else SubjectDigest), its cost (Costs[i], else
// Cost) and the set's deadline.
func (r SetRequest) Member(i int) Request {
	m := Request{SubjectDigest: r.SubjectDigest, Cost: r.Cost, Deadline: r.Deadline}
	if i < 0 || i >= len(r.Members) {
		return m
	}
	m.PolicyID = r.Members[i]
	if i < len(r.Subjects) {
		m.SubjectDigest = r.Subjects[i]
	}
	if i < len(r.Costs) {
		m.Cost = r.Costs[i]
	}
	return m
}

// LogValue implements slog.LogValuer: the request without its subject
// digests (their lengths only).
func (r SetRequest) LogValue() slog.Value {
	ids := make([]any, len(r.Members))
	for i, id := range r.Members {
		ids[i] = string(id)
	}
	attrs := []slog.Attr{slog.Any("members", ids)}
	if r.Subjects != nil {
		attrs = append(attrs, slog.Any("subject_digest_lens", r.subjectLens()))
	} else {
		attrs = append(attrs, slog.Int("subject_digest_len", len(r.SubjectDigest)))
	}
	if r.Costs != nil {
		attrs = append(attrs, slog.Any("costs", r.Costs))
	} else {
		attrs = append(attrs, slog.Int64("cost", r.Cost))
	}
	return slog.GroupValue(append(attrs, slog.Time("deadline", r.Deadline))...)
}

// String renders the request for logs without its subject digests.
func (r SetRequest) String() string {
	cost := fmt.Sprintf("cost %d", r.Cost)
	if r.Costs != nil {
		cost = fmt.Sprintf("costs %v", r.Costs)
	}
	if r.Subjects != nil {
		return fmt.Sprintf("set %v %s (subject digests of %v bytes)", r.Members, cost, r.subjectLens())
	}
	return fmt.Sprintf("set %v %s (subject digest of %d bytes)", r.Members, cost, len(r.SubjectDigest))
}

// GoString is String, so %#v does not print the digest either.
func (r SetRequest) GoString() string { return r.String() }

// Deciding returns the index of the member decision that speaks for a set,
// or -1 for none: when any member denied, the denying member with the
// largest RetryAfter (the set's Retry-After); otherwise the member with the
// least Remaining, the first of equals (the most specific). The edge sends
// its RateLimit field.
func Deciding(members []Decision) int {
	best := -1
	for i, d := range members {
		if best < 0 {
			best = i
			continue
		}
		b := members[best]
		switch {
		case !d.Allowed && b.Allowed:
			best = i
		case !d.Allowed && !b.Allowed && d.RetryAfter > b.RetryAfter:
			best = i
		case d.Allowed && b.Allowed && d.Remaining < b.Remaining:
			best = i
		}
	}
	return best
}

// ErrInvalidReceipt is wrapped by the error of a Refund given a zero
// receipt, or one of another policy than the request's.
var ErrInvalidReceipt = errors.New("invalid receipt")
