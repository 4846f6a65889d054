package ratelimiter

import (
	"errors"
	"fmt"
	"time"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// Decision is what Allow answers when the limiter decided: allowed or
// denied (a denial is a value, not an error). Its numbers are
// redis_rate.Result's.
type Decision struct {
	// Allowed: the request may go ahead (after Delay, for a queue).
	Allowed bool
	// Limit is the policy's limit, capacity or burst.
	Limit int64
	// Remaining is what is left after this request (0..Limit).
	Remaining int64
	// RetryAfter is 0 when allowed; when denied, the wait after which the
	// same request with no other traffic is allowed.
	RetryAfter time.Duration
	// ResetAfter is the wait until the state is back to full.
	ResetAfter time.Duration
	// Delay, set only on an allowed decision of a LeakyBucket, is the wait
	// until the request's slot: do the work after it (or give the slot
	// back through Limiter().Refund with Evaluated.Decision.Receipt).
	Delay time.Duration
	// Evaluated is the port's answer unflattened: source, certainty,
	// revision, receipt.
	Evaluated ratelimit.Evaluated
}

// String is "allowed, 9 of 10 left" or "denied, retry after 100ms".
func (d Decision) String() string {
	switch {
	case !d.Allowed:
		return fmt.Sprintf("denied, retry after %v", d.RetryAfter)
	case d.Delay > 0:
		return fmt.Sprintf("allowed after %v, %d of %d left", d.Delay, d.Remaining, d.Limit)
	}
	return fmt.Sprintf("allowed, %d of %d left", d.Remaining, d.Limit)
}

func newDecision(ev ratelimit.Evaluated, now time.Time) Decision {
	d := ev.Decision
	reset, ok := d.ResetAfter()
	if !ok {
		reset = max(d.ResetAt.Sub(now), 0)
	}
	return Decision{
		Allowed: d.Allowed, Limit: d.Limit, Remaining: d.Remaining,
		RetryAfter: d.RetryAfter, ResetAfter: reset, Delay: d.Delay, Evaluated: ev,
	}
}

// ErrUndecided is wrapped by every error Allow returns: the limiter did
// not decide, and the request must not be admitted. errors.As with
// *UnavailableError, *IndeterminateError or *IncompatibleError tells
// which certainty the failure has.
var ErrUndecided = errors.New("ratelimiter: no decision")

// UnavailableError: no decision, and provably nothing changed (rejected
// before sending, refused by the server before the program ran, breaker
// open, unsafe clock, invalid request). Retrying after RetryAfter is safe.
type UnavailableError struct{ Outcome ratelimit.Unavailable }

// IndeterminateError: the command may have run (a timeout or a lost
// connection after the request was written): state may have changed.
type IndeterminateError struct{ Outcome ratelimit.Indeterminate }

// IncompatibleError: state, program, reply or server version did not
// match; a retry will not help until an operator acts.
type IncompatibleError struct{ Outcome ratelimit.Incompatible }

// The messages name the kind, policy and category, never the subject, a
// secret or the cause's text (Unwrap gives the cause).

func (e *UnavailableError) Error() string {
	return fmt.Sprintf("ratelimiter: unavailable (policy %q, %s): nothing changed; retry after %v", e.Outcome.PolicyID, e.Outcome.Category, e.Outcome.RetryAfter)
}

func (e *IndeterminateError) Error() string {
	return fmt.Sprintf("ratelimiter: indeterminate (policy %q, %s): the request may have been counted; retry after %v", e.Outcome.PolicyID, e.Outcome.Category, e.Outcome.RetryAfter)
}

func (e *IncompatibleError) Error() string {
	return fmt.Sprintf("ratelimiter: incompatible (policy %q, %s)", e.Outcome.PolicyID, e.Outcome.Category)
}

// Unwrap gives ErrUndecided and the cause.
func (e *UnavailableError) Unwrap() []error { return undecided(e.Outcome.Cause) }

// Unwrap gives ErrUndecided and the cause.
func (e *IndeterminateError) Unwrap() []error { return undecided(e.Outcome.Cause) }

// Unwrap gives ErrUndecided and the cause.
func (e *IncompatibleError) Unwrap() []error { return undecided(e.Outcome.Cause) }

func undecided(cause error) []error {
	if cause == nil {
		return []error{ErrUndecided}
	}
	return []error{ErrUndecided, cause}
}

// RetryAfter is the outcome's hint for a retry (0 for Incompatible and
// for errors that are not the limiter's).
func RetryAfter(err error) time.Duration {
	var u *UnavailableError
	var i *IndeterminateError
	switch {
	case errors.As(err, &u):
		return u.Outcome.RetryAfter
	case errors.As(err, &i):
		return i.Outcome.RetryAfter
	}
	return 0
}

// decide flattens an outcome: a decision, or the error of its certainty.
// Anything that is not one of the four variants fails closed as
// Incompatible.
func decide(out ratelimit.Outcome, now time.Time) (Decision, error) {
	switch v := out.(type) {
	case ratelimit.Evaluated:
		return newDecision(v, now), nil
	case ratelimit.Unavailable:
		return Decision{}, &UnavailableError{Outcome: v}
	case ratelimit.Indeterminate:
		return Decision{}, &IndeterminateError{Outcome: v}
	case ratelimit.Incompatible:
		return Decision{}, &IncompatibleError{Outcome: v}
	default:
		return Decision{}, &IncompatibleError{Outcome: ratelimit.Incompatible{
			PolicyID: ratelimit.PolicyOf(out), Category: ratelimit.CategoryMalformedReply,
			Cause: fmt.Errorf("outcome of type %T", out),
		}}
	}
}
