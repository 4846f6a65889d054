package ratelimit

import (
	"context"
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

// MaxSetMembers bounds SetRequest.Members: a set is decided in at most
// that many program calls, and its reply and RateLimit-Policy field stay
// small.
const MaxSetMembers = 8

// SetPort evaluates several policies for one request, all or nothing (ADR
// 0027): the request is admitted only if every member admits it, and when
// any member denies, none consumes. Implementations are safe for
// concurrent use, never panic and never return nil.
//
// An allowed Evaluated outcome carries every member's decision in
// Evaluated.Members; its Decision is the one that speaks for the set
// (Deciding). Unavailable, Indeterminate and Incompatible name the member
// they concern in PolicyID. A member that admitted before another denied
// (members decided one after the other, in different Redis Cluster slots)
// is refunded; a refund that fails leaves that charge in place, which can
// only under-admit, and the outcome's Cause says so.
type SetPort interface {
	EvaluateSet(ctx context.Context, req SetRequest) Outcome
}

// SetRequest asks for Cost units of every policy in Members on behalf of
// SubjectDigest, all or nothing. The zero value is invalid. Printing it
// never shows the subject digest.
type SetRequest struct {
	// Members are 1..MaxSetMembers distinct policy IDs, most specific
	// first: the order members in different slots are decided in.
	Members []PolicyID
	// SubjectDigest is the pseudonymized subject (ScopeGlobal members
	// count it under GlobalSubject).
	SubjectDigest SubjectDigest
	// Cost is taken from every member: 1..each member's MaxCost.
	Cost int64
	// Deadline is required, as Request.Deadline: one deadline for the
	// whole set.
	Deadline time.Time
}

// ErrSetMembers is wrapped by SetRequest.Validate's error about Members.
var ErrSetMembers = errors.New("invalid set members")

// Validate checks what Request.Validate checks for every member, plus the
// member count (1..MaxSetMembers) and that no member repeats. Errors wrap
// ErrInvalidRequest and never contain the subject digest.
func (r SetRequest) Validate() error {
	var errs []error
	switch n := len(r.Members); {
	case n == 0:
		errs = append(errs, requestError("Members", fmt.Errorf("%w: none", ErrSetMembers)))
	case n > MaxSetMembers:
		errs = append(errs, requestError("Members", fmt.Errorf("%w: %d, at most %d", ErrSetMembers, n, MaxSetMembers)))
	}
	for i, id := range r.Members {
		for _, prev := range r.Members[:i] {
			if id == prev {
				errs = append(errs, requestError(fmt.Sprintf("Members[%d]", i), fmt.Errorf("%w: %q repeats", ErrSetMembers, id)))
				break
			}
		}
		if err := id.Validate(); err != nil {
			errs = append(errs, requestError(fmt.Sprintf("Members[%d]", i), err))
		}
	}
	return errors.Join(validateShared(errs, r.SubjectDigest, r.Cost, r.Deadline)...)
}

// FirstMember is Members[0], the most specific member; "" for none.
func (r SetRequest) FirstMember() PolicyID {
	if len(r.Members) == 0 {
		return ""
	}
	return r.Members[0]
}

// Member is the single-policy Request of member i: the set's subject,
// cost and deadline under Members[i].
func (r SetRequest) Member(i int) Request {
	var id PolicyID
	if i >= 0 && i < len(r.Members) {
		id = r.Members[i]
	}
	return Request{PolicyID: id, SubjectDigest: r.SubjectDigest, Cost: r.Cost, Deadline: r.Deadline}
}

// LogValue implements slog.LogValuer: the request without its subject
// digest.
func (r SetRequest) LogValue() slog.Value {
	ids := make([]any, len(r.Members))
	for i, id := range r.Members {
		ids[i] = string(id)
	}
	return slog.GroupValue(
		slog.Any("members", ids),
		slog.Int("subject_digest_len", len(r.SubjectDigest)),
		slog.Int64("cost", r.Cost),
		slog.Time("deadline", r.Deadline),
	)
}

// String renders the request for logs without its subject digest.
func (r SetRequest) String() string {
	return fmt.Sprintf("set %v cost %d (subject digest of %d bytes)", r.Members, r.Cost, len(r.SubjectDigest))
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

// Refunder gives back what one admission took (ADR 0025): req is the
// request that was admitted (its policy and subject; its Cost is not used,
// the receipt's is) and r the receipt its allowed decision carried. An
// Evaluated outcome means the refund ran or had nothing to do: its
// decision is Allowed, Refunded says how many units came back (0 for a
// stale receipt: another revision, another source, a rolled window) and
// Remaining what is left after it. Unavailable: nothing was sent, nothing
// changed; Indeterminate: the refund may have run; in either case the
// charge may stay, which can only under-admit. A zero receipt or one of
// another policy is Unavailable{invalid_request}.
type Refunder interface {
	Refund(ctx context.Context, req Request, r Receipt) Outcome
}

// ErrInvalidReceipt is wrapped by the error of a Refund given a zero
// receipt, or one of another policy than the request's.
var ErrInvalidReceipt = errors.New("invalid receipt")
