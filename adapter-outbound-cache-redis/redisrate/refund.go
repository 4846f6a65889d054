package redisrate

import (
	"context"
	"fmt"
	"time"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/internal/send"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/programs"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// Refund implements ratelimit.EdgePort (ADR 0025): the policy's refund
// program gives back the receipt's units on req's subject, sent at most
// once through everything Evaluate does (precheck, breaker, in-flight
// bound). A receipt of another revision or of a local decision is a no-op
// that sends nothing (Evaluated, Refunded 0); a zero receipt, or one of
// another policy than req's, is Unavailable{invalid_request}.
func (p *Provider) Refund(ctx context.Context, req ratelimit.Request, r ratelimit.Receipt) (out ratelimit.Outcome) {
	defer ratelimit.Recover(&out, req.PolicyID, "redisrate")
	if r.IsZero() || r.PolicyID() != req.PolicyID {
		return p.unavailable(req.PolicyID.Known(), ratelimit.CategoryInvalidRequest,
			fmt.Errorf("redisrate: %w: %v for policy %q", ratelimit.ErrInvalidReceipt, r, req.PolicyID.Known()))
	}
	req.Cost = r.Cost()
	c, refused := p.precheck(ctx, req)
	if refused != nil {
		return refused
	}
	ps := c.policy
	if r.Revision() != ps.policy.Revision() || r.Source() != ratelimit.GlobalRedis {
		// Another revision's state is not this one; a local decision's
		// charge is not in Redis. Nothing to give back here.
		return ratelimit.Evaluated{Decision: ratelimit.Decision{Allowed: true, PolicyID: ps.policy.ID(), PolicyRevision: ps.policy.Revision(), Source: ratelimit.GlobalRedis, Certainty: ps.certainty}}
	}
	// BoundRefundArgs holds the cost already: the ARGV goes as built.
	script, argv := ps.refund, programs.BoundRefundArgs(ps.policy, r.Cost(), r.AtMillis())
	if req.Lease && ps.giveBack != nil {
		// A lease's unspent units: its record goes with them (ADR 0042).
		script, argv = ps.giveBack, programs.BoundGiveBackArgs(ps.policy, r.Cost(), r.AtMillis())
	}
	res := p.exec.Run(ctx, send.Call{Script: script, Key: c.key, Argv: argv, SendBy: c.sendBy})
	rep, ok := res.(send.Replied)
	if !ok || rep.Err != nil {
		return p.outcome(ps, res, r.Cost())
	}
	if err := refunded(res); err != nil {
		// A refusal (clock, state, arguments) decodes as a decision
		// reply's would; anything else is malformed.
		if o := p.replyOutcome(ps, rep, r.Cost()); o.Kind() != ratelimit.KindEvaluated {
			return o
		}
		return ratelimit.Incompatible{PolicyID: ps.policy.ID(), Category: ratelimit.CategoryMalformedReply, Cause: err}
	}
	v := rep.Reply.([]any) // refunded checked the shape
	n := func(i int) int64 { x, _ := v[i].(int64); return x }
	return ratelimit.Evaluated{Decision: ratelimit.Decision{
		Allowed:        true,
		Limit:          n(programs.ReplyLimit),
		Remaining:      n(programs.ReplyRemaining),
		Refunded:       n(programs.ReplyRetryAfter),
		ResetAt:        time.UnixMilli(n(programs.ReplyResetAt)),
		ServerNow:      time.UnixMilli(n(programs.ReplyServerNow)),
		PolicyID:       ps.policy.ID(),
		PolicyRevision: ps.policy.Revision(),
		Source:         ratelimit.GlobalRedis,
		Certainty:      ps.certainty,
	}}
}
