package redisrate

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/internal/certainty"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/internal/send"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/programs"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// outcome maps the send loop's result, one case per variant: a call not
// sent by its reason, one that may have run through the classifier
// (Indeterminate), a reply through programs.Decode and its status (an
// error reply through the classifier).
func (p *Provider) outcome(ps *policyState, res send.Sent) ratelimit.Outcome {
	switch r := res.(type) {
	case send.NotSent:
		return p.notSentOutcome(ps, r)
	case send.MayHaveRun:
		return p.failed(ps, r.Command, true, r.Cause)
	case send.Replied:
		if r.Err != nil {
			return p.failed(ps, r.Command, true, r.Err)
		}
		return p.replyOutcome(ps, r)
	}
	panic(fmt.Sprintf("redisrate: unknown send result %T", res))
}

// notSentOutcome maps a call that was not sent: nothing ran.
func (p *Provider) notSentOutcome(ps *policyState, r send.NotSent) ratelimit.Outcome {
	id := ps.policy.ID()
	//exhaustive:enforce
	switch r.Reason {
	case send.ReasonDeadline:
		return p.unavailable(id, ratelimit.CategoryDeadline, fmt.Errorf("redisrate: %w", r.Cause))
	case send.ReasonBreakerOpen:
		return p.unavailable(id, ratelimit.CategoryCircuitOpen, r.Cause)
	case send.ReasonInFlight:
		return p.unavailable(id, ratelimit.CategoryAdmission, r.Cause)
	case send.ReasonPreSend:
		switch {
		case errors.Is(r.Cause, ErrServerVersion), errors.Is(r.Cause, ErrScriptDigest):
			// A cluster node met after Start failed qualification.
			return ratelimit.Incompatible{PolicyID: id, Category: ratelimit.CategoryServerVersion, Cause: r.Cause}
		case isServerPolicyRefusal(r.Cause):
			// A cluster primary met after Start failed the server-policy
			// checks.
			return p.unavailable(id, ratelimit.CategoryServerRejected, r.Cause)
		}
		return p.failed(ps, r.Command, false, r.Cause)
	}
	panic(fmt.Sprintf("redisrate: unknown not-sent reason %d", r.Reason))
}

// replyOutcome maps the program's reply.
func (p *Provider) replyOutcome(ps *policyState, res send.Replied) ratelimit.Outcome {
	id := ps.policy.ID()
	r, err := programs.Decode(res.Reply, ps.policy)
	if err != nil {
		return ratelimit.Incompatible{PolicyID: id, Category: ratelimit.CategoryMalformedReply, Cause: err}
	}
	//exhaustive:enforce
	switch r.Status {
	case programs.StatusReplayed:
		if p.acks > 0 {
			// WAIT behind a replay (which writes nothing) cannot vouch for
			// the recorded write's replication.
			return ratelimit.Indeterminate{PolicyID: id, RetryAfter: p.retryHint, Category: ratelimit.CategoryReplication, Cause: fmt.Errorf("redisrate: %w: %w", ErrReplicationShortfall, errReplayUnreplicated)}
		}
		d := p.decision(ps, r)
		d.Allowed, d.Replayed = true, true
		return ratelimit.Evaluated{Decision: d}
	case programs.StatusDedupConflict:
		return ratelimit.Incompatible{PolicyID: id, Category: ratelimit.CategoryDedupConflict, Cause: errDedupConflict}
	case programs.StatusAllowed, programs.StatusDenied:
		if r.Status == programs.StatusAllowed && p.acks > 0 && (res.AckErr != nil || res.Acked < p.acks) {
			// Admitted by the primary, not acknowledged by enough replicas:
			// a failover could lose it. Not admitted; stays counted.
			cause := fmt.Errorf("redisrate: %w: WAIT %d: %d acknowledged", ErrReplicationShortfall, p.acks, res.Acked)
			if res.AckErr != nil {
				cause = fmt.Errorf("redisrate: %w: WAIT %d: %w", ErrReplicationShortfall, p.acks, res.AckErr)
			}
			return ratelimit.Indeterminate{PolicyID: id, RetryAfter: p.retryHint, Category: ratelimit.CategoryReplication, Cause: cause}
		}
		d := p.decision(ps, r)
		d.Allowed = r.Status == programs.StatusAllowed
		return ratelimit.Evaluated{Decision: d}
	case programs.StatusClockUnsafe:
		return ratelimit.Unavailable{PolicyID: id, RetryAfter: p.clockHint(r), Category: ratelimit.CategoryClockUnsafe, Cause: errClockUnsafe}
	case programs.StatusStateIncompatible:
		return ratelimit.Incompatible{PolicyID: id, Category: ratelimit.CategoryStateIncompatible, Cause: errStateIncompatible}
	default: // programs.StatusInvalid: Decode admits no other status
		return ratelimit.Incompatible{PolicyID: id, Category: ratelimit.CategoryInvalidArguments, Cause: errInvalidArguments}
	}
}

// decision is the Decision of a reply with a decision (its Allowed and
// Replayed are for the caller to set).
func (p *Provider) decision(ps *policyState, r programs.Reply) ratelimit.Decision {
	return ratelimit.Decision{
		Limit:          r.Limit,
		Remaining:      r.Remaining,
		RetryAfter:     millis(r.RetryAfterMillis),
		ResetAt:        time.UnixMilli(r.ResetAtMillis),
		ServerNow:      time.UnixMilli(r.ServerNowMillis),
		PolicyID:       ps.policy.ID(),
		PolicyRevision: ps.policy.Revision(),
		Source:         ratelimit.GlobalRedis,
		Certainty:      ps.certainty,
	}
}

func (p *Provider) unavailable(id ratelimit.PolicyID, cat ratelimit.Category, cause error) ratelimit.Outcome {
	return ratelimit.Unavailable{PolicyID: id, RetryAfter: p.retryHint, Category: cat, Cause: cause}
}

// failed maps a failed program call through the classifier; written says
// whether go-redis may have begun writing command.
func (p *Provider) failed(ps *policyState, command string, written bool, err error) ratelimit.Outcome {
	v := certainty.Classify(err, written)
	cause := &CallError{Command: command, Program: ps.script.Name(), Written: written, Err: err}
	id := ps.policy.ID()
	switch v.Kind {
	case ratelimit.KindUnavailable:
		return ratelimit.Unavailable{PolicyID: id, RetryAfter: p.retryHint, Category: v.Category, Cause: cause}
	case ratelimit.KindIndeterminate:
		return ratelimit.Indeterminate{PolicyID: id, RetryAfter: p.retryHint, Category: v.Category, Cause: cause}
	default:
		return ratelimit.Incompatible{PolicyID: id, Category: v.Category, Cause: cause}
	}
}

// clockHint is the RetryAfter of Unavailable{clock_unsafe}: the program's
// wait until the regression is tolerated again, within
// [retryHint, MaxClockRetryAfter]; MaxClockRetryAfter when the server clock
// is past MaxServerMillis (no wait heals that).
func (p *Provider) clockHint(r programs.Reply) time.Duration {
	if r.EffectiveNowMillis == 0 {
		return MaxClockRetryAfter
	}
	return min(max(millis(r.RetryAfterMillis), p.retryHint), MaxClockRetryAfter)
}

// millis converts ms to a Duration, saturating instead of overflowing (a
// policy horizon may exceed the ~292 years a Duration holds).
func millis(ms int64) time.Duration {
	if ms > math.MaxInt64/int64(time.Millisecond) {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(ms) * time.Millisecond
}
