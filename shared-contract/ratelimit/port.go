package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tech-log/tech-log-backend/shared-contract/keyspace"
)

// EdgePort is the one rate-limit port (ADR 0033): every operation an
// inbound adapter asks of a limiter, so that a decorator (metrics, denial
// cache, local fallback) and a provider implement all of them or do not
// compile. Most callers want Evaluate, once per request; a route mapped to
// several policies wants EvaluateSet; Refund gives back what an admission
// took, by the Receipt its allowed decision carried (as x/time/rate's
// Reservation.Cancel). Implementations are safe for concurrent use.
//
// No method panics or returns nil: a program fault (a recovered panic) is
// Incompatible{program_fault} (Recover). Only an allowed Evaluated
// outcome admits the request (see Admitted); every failure is a value that
// says what the provider knows about whether state changed.
type EdgePort interface {
	// Evaluate takes req.Cost units of req.PolicyID for req.SubjectDigest
	// (its Scope's subject: Policy.Subject).
	Evaluate(ctx context.Context, req Request) Outcome

	// EvaluateSet evaluates several policies for one request, all or
	// nothing (ADR 0027): the request is admitted only if every member
	// admits it, and when any member denies, none consumes. Members share
	// the set's subject and cost unless SetRequest.Subjects and Costs give
	// each its own (the Envoy RLS's descriptors, issue 35).
	//
	// An allowed Evaluated outcome carries every member's decision in
	// Evaluated.Members; its Decision is the one that speaks for the set
	// (Deciding). Unavailable, Indeterminate and Incompatible name the
	// member they concern in PolicyID. A member that admitted before
	// another denied (members decided one after the other, in different
	// Redis Cluster slots) is refunded; a refund that fails leaves that
	// charge in place, which can only under-admit, and the outcome's
	// Cause says so.
	EvaluateSet(ctx context.Context, req SetRequest) Outcome

	// Refund gives back what one admission took (ADR 0025): req is the
	// request that was admitted (its policy and subject; its Cost is not
	// used, the receipt's is) and r the receipt its allowed decision
	// carried. An Evaluated outcome means the refund ran or had nothing to
	// do: its decision is Allowed, Refunded says how many units came back
	// (0 for a stale receipt: another revision, another source, a rolled
	// window) and Remaining what is left after it. Unavailable: nothing
	// was sent, nothing changed; Indeterminate: the refund may have run; in
	// either case the charge may stay, which can only under-admit. A zero
	// receipt or one of another policy is Unavailable{invalid_request}
	// (ErrInvalidReceipt).
	Refund(ctx context.Context, req Request, r Receipt) Outcome
}

// ErrPanic is wrapped by the Cause of the Incompatible{program_fault}
// outcome Recover makes of a panic: nothing is known about the
// evaluation's effect.
var ErrPanic = errors.New("panic while evaluating")

// Recover is the one program-fault guard of an EdgePort's methods: deferred
// with a pointer to the method's named result, the policy the call
// concerns and the component's name (defer ratelimit.Recover(&out,
// req.PolicyID, "redisrate")), it turns a panic into
// Incompatible{PolicyID: id.Known(), program_fault}, whose Cause wraps
// ErrPanic and the panic value (at most 200 characters), so that no
// method panics. It must be deferred directly: recover only stops a panic
// when called by the deferred function itself.
func Recover(out *Outcome, id PolicyID, component string) {
	if r := recover(); r != nil {
		*out = Incompatible{
			PolicyID: id.Known(),
			Category: CategoryProgramFault,
			Cause:    fmt.Errorf("%s: %w: %.200s", component, ErrPanic, fmt.Sprint(r)),
		}
	}
}

// Known returns id when it has the PolicyID syntax and "" otherwise: the
// PolicyID an outcome answering a request that may be invalid carries, so
// that a bad request cannot put arbitrary text into an outcome's PolicyID
// (a metric label).
func (id PolicyID) Known() PolicyID {
	if keyspace.IsSegment(string(id)) {
		return id
	}
	return ""
}

// RefundDetached is Refund for a caller whose request may already have
// ended (a queue left, a handler returned, a lease given back at Close):
// port.Refund on a context that keeps ctx's values but not its
// cancellation, bounded by timeout, with req.Deadline now + timeout. A
// refund that does not run leaves the charge in place, which can only
// under-admit.
func RefundDetached(ctx context.Context, port EdgePort, req Request, r Receipt, now time.Time, timeout time.Duration) Outcome {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	req.Deadline = now.Add(timeout)
	return port.Refund(ctx, req, r)
}
