package redisrate

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/internal/certainty"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/internal/send"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/programs"
	"github.com/tech-log/tech-log-backend/shared-contract/keyspace"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// Evaluate implements ratelimit.EdgePort. It never panics and never returns
// nil. It reads precheck → call → outcome, all in this file but the send
// loop: precheck refuses without sending anything, the send loop makes one
// program call (EVALSHA, one EVAL on NOSCRIPT), and outcome maps its result
// as docs/failure-certainty.md describes. A request with an evaluation ID
// goes through evaluateDedup (dedup.go), the retry of a lost reply.
func (p *Provider) Evaluate(ctx context.Context, req ratelimit.Request) ratelimit.Outcome {
	return p.evaluate(ctx, req, nil)
}

// evaluate is Evaluate with pre (optional; EvaluateAfterCharge) sent ahead
// of the program in the same round trip.
func (p *Provider) evaluate(ctx context.Context, req ratelimit.Request, pre *preCharge) (out ratelimit.Outcome) {
	defer ratelimit.Recover(&out, req.PolicyID, "redisrate")
	c, refused := p.precheck(ctx, req)
	if refused != nil {
		return refused
	}
	if pre != nil && pre.alone {
		// Charge: the charge program is the call.
		res := p.exec.Run(ctx, send.Call{Script: c.policy.charge, Key: c.key, Argv: c.policy.argv, Cost: pre.units, CostArg: programs.ArgCost, SendBy: c.sendBy})
		return p.outcome(c.policy, res, req.Cost)
	}
	var sp *send.PreCharge
	if pre != nil {
		pre.PreCharge = send.PreCharge{Script: c.policy.charge, Argv: c.policy.argv, Units: pre.units, UnitsArg: programs.ArgCost}
		sp = &pre.PreCharge
	}
	if req.Lease && c.policy.lease != nil && pre == nil && c.dedupKey == "" {
		// A lease's reservation, recorded in the state (ADR 0042); it
		// drops the record of the lease it replaces, one of this policy
		// revision's in Redis.
		var replaces int64
		if r := req.Replaces; r.PolicyID() == req.PolicyID && r.Revision() == c.policy.policy.Revision() && r.Source() == ratelimit.GlobalRedis {
			replaces = r.AtMillis()
		}
		res := p.exec.Run(ctx, send.Call{Script: c.policy.lease, Key: c.key, Argv: programs.BoundLeaseArgs(c.policy.policy, req.Cost, replaces), SendBy: c.sendBy})
		return p.outcome(c.policy, res, req.Cost)
	}
	if c.dedupKey == "" {
		res := p.exec.Run(ctx, send.Call{Script: c.policy.script, Key: c.key, Argv: c.policy.boundArgv, Cost: req.Cost, CostArg: programs.ArgCost, SendBy: c.sendBy, Pre: sp})
		return p.outcome(c.policy, res, req.Cost)
	}
	return p.evaluateDedup(ctx, c, req, sp)
}

// checked is a request that passed the precheck.
type checked struct {
	policy *policyState
	key    string
	// sendBy is the latest time a program command may be sent: the earlier
	// of req.Deadline and ctx's deadline, less one command timeout.
	sendBy time.Time
	// dedupKey is the subject's dedup hash when the request carries an
	// evaluation ID (the policy then has a dedup window), else "".
	dedupKey string
}

// precheck decides everything that can be decided without sending, and is
// the one place that decides Unavailable{deadline}: in order, request
// validation (Unavailable{invalid_request}), policy lookup
// (Unavailable{unknown_policy}), cost against MaxCost (invalid_request),
// closed (Unavailable{closed}), server version (Incompatible{server_version}
// when Start found the server too old), the deadline (Unavailable{deadline}:
// the context is done, the earlier of req.Deadline and ctx's deadline has
// passed, or it leaves less than one CommandTimeout) and the state key. A
// non-nil Outcome is the refusal. The in-flight bound
// (Unavailable{admission}, no waiting) is the target's, taken by the send
// loop once the route has picked the target.
func (p *Provider) precheck(ctx context.Context, req ratelimit.Request) (checked, ratelimit.Outcome) {
	if ctx == nil {
		return checked{}, p.unavailable(req.PolicyID.Known(), ratelimit.CategoryInvalidRequest, errNilContext)
	}
	if err := req.Validate(); err != nil {
		return checked{}, p.unavailable(req.PolicyID.Known(), ratelimit.CategoryInvalidRequest, err)
	}
	ps := p.policies[req.PolicyID]
	if ps == nil {
		return checked{}, p.unavailable(req.PolicyID, ratelimit.CategoryUnknownPolicy, fmt.Errorf("redisrate: %w: %q", errUnknownPolicy, req.PolicyID))
	}
	if err := req.ValidateFor(ps.policy); err != nil {
		return checked{}, p.unavailable(req.PolicyID, ratelimit.CategoryInvalidRequest, err)
	}
	if p.closed.Load() {
		return checked{}, p.unavailable(req.PolicyID, ratelimit.CategoryClosed, ErrClosed)
	}
	if e := p.versionErr.Load(); e != nil {
		return checked{}, ratelimit.Incompatible{PolicyID: req.PolicyID, Category: ratelimit.CategoryServerVersion, Cause: *e}
	}
	if err := ctx.Err(); err != nil {
		return checked{}, p.unavailable(req.PolicyID, ratelimit.CategoryDeadline, err)
	}
	deadline := req.EffectiveDeadline(ctx)
	now := p.now()
	if !deadline.After(now) {
		return checked{}, p.unavailable(req.PolicyID, ratelimit.CategoryDeadline, fmt.Errorf("redisrate: %w", ratelimit.ErrDeadlinePassed))
	}
	sendBy := deadline.Add(-p.timeout)
	if now.After(sendBy) {
		return checked{}, p.unavailable(req.PolicyID, ratelimit.CategoryDeadline, errDeadlineTooShort)
	}
	// A global policy counts every subject under ratelimit.GlobalSubject.
	key, err := stateKey(p.keys, ps.id, ps.revision, ps.algorithm, ps.policy.Subject(req.SubjectDigest))
	if err != nil {
		return checked{}, p.unavailable(req.PolicyID, ratelimit.CategoryInvalidRequest, err)
	}
	var dk string
	if req.EvaluationID != "" { // ValidateFor: the policy has a dedup window
		if dk, err = DedupKey(p.keys, req.SubjectDigest); err != nil {
			return checked{}, p.unavailable(req.PolicyID, ratelimit.CategoryInvalidRequest, err)
		}
	}
	return checked{policy: ps, key: key, sendBy: sendBy, dedupKey: dk}, nil
}

// stateKey is the one key derivation (the key format is keys.go's;
// StateKey there is its exported form); the precheck calls it with the
// per-policy strings precomputed. The slot tag is derived from the subject
// digest alone, so every key of one subject (other policies, future
// per-subject keys) shares one Redis Cluster slot.
func stateKey(keys *keyspace.Builder, id, revision, algorithm string, subject ratelimit.SubjectDigest) (string, error) {
	return keys.TaggedKey(KeyCapability, id, KeyKind, string(subject), id, revision, algorithm, string(subject))
}

// outcome maps the send loop's result, one case per variant: a call not
// sent by its reason, one that may have run through the classifier
// (Indeterminate), a reply through programs.Decode and its status (an
// error reply through the classifier). cost is the request's: an allowed
// decision's receipt takes it.
func (p *Provider) outcome(ps *policyState, res send.Sent, cost int64) ratelimit.Outcome {
	switch r := res.(type) {
	case send.NotSent:
		return p.notSentOutcome(ps, r)
	case send.MayHaveRun:
		return p.failed(ps, r.Command, true, r.Cause)
	case send.Replied:
		if r.Err != nil {
			return p.failed(ps, r.Command, true, r.Err)
		}
		return p.replyOutcome(ps, r, cost)
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

// replyOutcome maps the program's reply; cost is the request's, for an
// allowed decision's receipt (built here, so the outcome is boxed once).
func (p *Provider) replyOutcome(ps *policyState, res send.Replied, cost int64) ratelimit.Outcome {
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
		if d.Allowed {
			// The refund's receipt (ADR 0025).
			d.Receipt = ratelimit.NewReceipt(id, ps.policy.Revision(), cost, r.EffectiveNowMillis, ratelimit.GlobalRedis)
		}
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
	retry, delay := r.Waits()
	return ratelimit.Decision{
		Limit:          r.Limit,
		Remaining:      r.Remaining,
		RetryAfter:     retry,
		Delay:          delay,
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
	return min(max(programs.Millis(r.RetryAfterMillis), p.retryHint), MaxClockRetryAfter)
}
