package redisrate

import (
	"context"
	"fmt"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/internal/send"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/programs"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// EvaluateAfterCharge is Evaluate with units charged to the request's
// subject first, in the same round trip: the policy's charge program
// (docs/programs.md: consumes without denying, saturates at the limit) is
// pipelined right before the request's program on the same connection, so
// the server runs it first and the decision counts it. It is how a local
// fallback reconciles what it admitted while Redis was unreachable
// (docs/degraded-mode.md). units is 1..the policy's limit.
//
// The request goes through everything Evaluate does (precheck, breaker,
// in-flight bound) and its outcome is Evaluate's. charged reports that the
// server ran the charge (its reply was read): nothing was charged when the
// request was refused before sending, or when the charge failed; when a
// failed charge may have run (the connection failed after it was written)
// charged is false too, so a caller that charges the units again may
// charge them twice (the conservative direction). The charge is sent once,
// with the first attempt: not with the EVAL after NOSCRIPT, a redirect or
// the retry of a dedup call.
func (p *Provider) EvaluateAfterCharge(ctx context.Context, req ratelimit.Request, units int64) (out ratelimit.Outcome, charged bool) {
	ps := p.policies[req.PolicyID]
	if ps == nil || units < 1 || units > ps.policy.Limit() {
		if ps != nil {
			return p.unavailable(req.PolicyID, ratelimit.CategoryInvalidRequest, fmt.Errorf("redisrate: %w: charge units %d not in 1..%d", ratelimit.ErrInvalidRequest, units, ps.policy.Limit())), false
		}
		return p.Evaluate(ctx, req), false // the precheck names the unknown policy
	}
	pre := &preCharge{units: units}
	out = p.evaluate(ctx, req, pre)
	if !pre.Sent || pre.Err != nil {
		return out, false
	}
	r, err := programs.Decode(pre.Reply, ps.policy)
	return out, err == nil && r.Status == programs.StatusAllowed
}

// Charge runs the policy's charge program for units (1..the policy's
// limit) on the request's subject, alone: a reconciliation with no
// decision behind it. req names the policy, the subject and the deadline
// and must be valid (its Cost is not charged; 1 will do). It goes through
// everything Evaluate does (precheck, breaker, in-flight bound, at most
// once); a charge the server ran is an allowed Evaluated outcome (the
// charge program never denies), any other outcome means it was not
// charged or, for Indeterminate, may have been.
func (p *Provider) Charge(ctx context.Context, req ratelimit.Request, units int64) ratelimit.Outcome {
	ps := p.policies[req.PolicyID]
	if ps != nil && (units < 1 || units > ps.policy.Limit()) {
		return p.unavailable(req.PolicyID, ratelimit.CategoryInvalidRequest, fmt.Errorf("redisrate: %w: charge units %d not in 1..%d", ratelimit.ErrInvalidRequest, units, ps.policy.Limit()))
	}
	return p.evaluate(ctx, req, &preCharge{units: units, alone: true})
}

// preCharge is what EvaluateAfterCharge and Charge ask evaluate to send:
// units of the policy's charge program, ahead of the request's program
// (the send loop's PreCharge, which also records the charge's reply) or
// alone (Charge).
type preCharge struct {
	units int64
	alone bool
	send.PreCharge
}
