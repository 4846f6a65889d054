package redisrate

import (
	"context"
	"fmt"
	"time"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/internal/send"
	"github.com/tech-log/tech-log-backend/shared-contract/keyspace"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// Retry-after hints of failed outcomes (docs/failure-certainty.md).
const (
	// MinFailureRetryAfter is the least RetryAfter of an Unavailable or
	// Indeterminate outcome; the hint is max(MinFailureRetryAfter,
	// CommandTimeout): a retry sooner than one command timeout would meet
	// the same condition.
	MinFailureRetryAfter = time.Second
	// MaxClockRetryAfter caps the hint of Unavailable{clock_unsafe}, which
	// is otherwise the wait until the server clock is back within the
	// tolerated regression.
	MaxClockRetryAfter = time.Minute
)

// Evaluate implements ratelimit.EdgePort. It never panics and never returns
// nil. It reads precheck → call → outcome: precheck refuses without sending
// anything, the executor makes one program call (EVALSHA, one EVAL on
// NOSCRIPT), and outcome maps its result as docs/failure-certainty.md
// describes.
func (p *Provider) Evaluate(ctx context.Context, req ratelimit.Request) ratelimit.Outcome {
	return p.evaluate(ctx, req, nil)
}

// evaluate is Evaluate with pre (optional; EvaluateAfterCharge) sent ahead
// of the program in the same round trip.
func (p *Provider) evaluate(ctx context.Context, req ratelimit.Request, pre *preCharge) (out ratelimit.Outcome) {
	defer func() {
		if r := recover(); r != nil {
			out = ratelimit.Incompatible{
				PolicyID: knownID(req.PolicyID),
				Category: ratelimit.CategoryProgramFault,
				Cause:    fmt.Errorf("redisrate: %w: %s", errPanic, truncate(fmt.Sprint(r))),
			}
		}
	}()
	c, refused := p.precheck(ctx, req)
	if refused != nil {
		return refused
	}
	if pre != nil && pre.alone {
		// Charge: the charge program is the call.
		return p.outcome(c.policy, p.exec.Run(ctx, c.policy.charge, c.key, c.policy.argv, pre.units, c.sendBy))
	}
	var sp *send.PreCharge
	if pre != nil {
		pre.PreCharge = send.PreCharge{Script: c.policy.charge, Argv: c.policy.argv, Units: pre.units}
		sp = &pre.PreCharge
	}
	if c.dedupKey == "" {
		res := p.exec.RunAfter(ctx, sp, c.policy.script, c.key, "", "", c.policy.argv, req.Cost, c.sendBy)
		return p.outcome(c.policy, res)
	}
	return p.evaluateDedup(ctx, c, req, sp)
}

// evaluateDedup runs the policy's dedup program for a request with an
// evaluation ID and, when that call is Indeterminate because its reply was
// lost (timeout, connection lost), sends it once more with the same ID if
// the caller's deadline leaves a command timeout for it: the program
// answers the recorded decision if the first call admitted (using one of
// the ID's replays), so the request is charged at most once
// (docs/degraded-mode.md). A policy whose DedupMaxReplays is 0 is never
// retried: its program would charge the retry again. A retry that gets no
// decision leaves the first call's Indeterminate.
func (p *Provider) evaluateDedup(ctx context.Context, c checked, req ratelimit.Request, pre *send.PreCharge) ratelimit.Outcome {
	ps := c.policy
	run := func(pre *send.PreCharge) ratelimit.Outcome {
		return p.outcome(ps, p.exec.RunAfter(ctx, pre, ps.dedup, c.key, c.dedupKey, string(req.EvaluationID), ps.dedupArgv, req.Cost, c.sendBy))
	}
	out := run(pre) // the charge, if any, goes with the first call only
	ind, ok := out.(ratelimit.Indeterminate)
	if !ok || (ind.Category != ratelimit.CategoryTimeout && ind.Category != ratelimit.CategoryConnectionLost) ||
		p.acks > 0 || ps.policy.DedupMaxReplays() == 0 || ctx.Err() != nil || p.now().After(c.sendBy) {
		return out
	}
	retried := run(nil)
	switch retried.(type) {
	case ratelimit.Evaluated, ratelimit.Incompatible:
		p.dedupRetries.decided.Add(1)
		return retried
	default: // Unavailable, Indeterminate (outcome returns nothing else)
		// The first call may have run: its Indeterminate stands.
		p.dedupRetries.failed.Add(1)
		return out
	}
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
		return checked{}, p.unavailable(knownID(req.PolicyID), ratelimit.CategoryInvalidRequest, errNilContext)
	}
	if err := req.Validate(); err != nil {
		return checked{}, p.unavailable(knownID(req.PolicyID), ratelimit.CategoryInvalidRequest, err)
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
	key, err := stateKey(p.keys, ps.id, ps.revision, ps.algorithm, req.SubjectDigest)
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

// knownID returns id when it is a syntactically valid PolicyID and ""
// otherwise, so that an invalid request cannot put arbitrary text into an
// outcome's PolicyID (a metric label).
func knownID(id ratelimit.PolicyID) ratelimit.PolicyID {
	if keyspace.IsSegment(string(id)) {
		return id
	}
	return ""
}

// DedupRetries returns how many Indeterminate calls with an evaluation ID
// were retried with the same ID and got a decision (decided) or did not
// (failed), since New.
func (p *Provider) DedupRetries() (decided, failed uint64) {
	return p.dedupRetries.decided.Load(), p.dedupRetries.failed.Load()
}
