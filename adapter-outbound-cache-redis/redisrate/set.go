package redisrate

import (
	"context"
	"errors"
	"fmt"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/internal/send"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/programs"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

var _ ratelimit.SetPort = (*Provider)(nil)

// ErrRefundFailed is wrapped by the Cause of a set's failure outcome when
// a member admitted before it could not be given back: that charge stays,
// which can only under-admit (ADR 0027). SetRefundFailures counts them.
var ErrRefundFailed = errors.New("refund of an earlier member failed; its charge stays")

// EvaluateSet implements ratelimit.SetPort (ADR 0027): every member goes
// through Evaluate's precheck (the first refusal answers the set, nothing
// sent), then the members are decided in request order, each by its own
// program call, until one does not admit. The members admitted before it
// are then given back (their refund programs, ADR 0025, in reverse order)
// and the set's outcome is that member's: denied (Evaluated, with every
// decision so far in Members) or its failure. So no member ever admits
// beyond its limit; between a member's admission and its refund another
// request may find it charged (under-admission only), and a refund that
// fails leaves the charge (counted; the failure's Cause wraps
// ErrRefundFailed). A set of one is Evaluate with Members set.
func (p *Provider) EvaluateSet(ctx context.Context, req ratelimit.SetRequest) (out ratelimit.Outcome) {
	defer func() {
		if r := recover(); r != nil {
			out = ratelimit.Incompatible{
				PolicyID: knownID(firstMember(req)),
				Category: ratelimit.CategoryProgramFault,
				Cause:    fmt.Errorf("redisrate: %w: %s", errPanic, truncate(fmt.Sprint(r))),
			}
		}
	}()
	if ctx == nil {
		return p.unavailable(knownID(firstMember(req)), ratelimit.CategoryInvalidRequest, errNilContext)
	}
	if err := req.Validate(); err != nil {
		return p.unavailable(knownID(firstMember(req)), ratelimit.CategoryInvalidRequest, err)
	}
	members := make([]checked, len(req.Members))
	for i := range req.Members {
		c, refused := p.precheck(ctx, req.Member(i))
		if refused != nil {
			return refused
		}
		members[i] = c
	}
	decided := make([]ratelimit.Decision, 0, len(members))
	var taken []admission
	for _, c := range members {
		res := p.exec.Run(ctx, c.policy.script, c.key, c.policy.argv, req.Cost, c.sendBy)
		o := p.outcome(c.policy, res)
		ev, ok := o.(ratelimit.Evaluated)
		if ok && ev.Decision.Allowed {
			decided = append(decided, ev.Decision)
			taken = append(taken, admission{c: c, at: effectiveNow(res, c.policy.policy)})
			continue
		}
		refundErr := p.giveBack(ctx, taken, req.Cost)
		if !ok {
			return withCause(o, refundErr)
		}
		decided = append(decided, ev.Decision)
		return ratelimit.Evaluated{Decision: decided[ratelimit.Deciding(decided)], Members: decided}
	}
	return ratelimit.Evaluated{Decision: decided[ratelimit.Deciding(decided)], Members: decided}
}

// SetRefundFailures is the number of set members whose refund failed
// (their charge stayed: under-admission only), since New.
func (p *Provider) SetRefundFailures() uint64 { return p.refundFailures.Load() }

// admission is a set member the program admitted: its checked request and
// the instant it admitted at (the reply's effectiveNowMillis, the refund's
// receipt).
type admission struct {
	c  checked
	at int64
}

// giveBack refunds taken, newest first, each by its policy's refund
// program sent once, on a context that outlives the caller's (a client
// that went away still gets its members given back) and with one command
// timeout of its own. It returns nil when every refund ran, or an error
// wrapping ErrRefundFailed.
func (p *Provider) giveBack(ctx context.Context, taken []admission, cost int64) error {
	if len(taken) == 0 {
		return nil
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*p.timeout)
	defer cancel()
	var errs []error
	for i := len(taken) - 1; i >= 0; i-- {
		a := taken[i]
		ps := a.c.policy
		err := refunded(p.exec.Run(rctx, ps.refund, a.c.key, programs.RefundArgs(ps.policy, cost, a.at), cost, p.now().Add(p.timeout)))
		if err != nil {
			p.refundFailures.Add(1)
			errs = append(errs, fmt.Errorf("redisrate: %w: member %q: %w", ErrRefundFailed, ps.policy.ID(), err))
		}
	}
	return errors.Join(errs...)
}

// refunded reports whether a refund call ran: its reply was read and is
// the refund programs' 7 integers with status 1 (ADR 0025 point 4).
func refunded(res send.Sent) error {
	r, ok := res.(send.Replied)
	if !ok {
		return fmt.Errorf("not run or may have run: %T", res)
	}
	if r.Err != nil {
		return r.Err
	}
	arr, ok := r.Reply.([]any)
	if !ok || len(arr) != programs.ReplyLen {
		return fmt.Errorf("malformed refund reply %s", truncate(fmt.Sprint(r.Reply)))
	}
	if s, ok := arr[0].(int64); !ok || programs.Status(s) != programs.StatusAllowed {
		return fmt.Errorf("refund status %v", arr[0])
	}
	return nil
}

// effectiveNow is the effectiveNowMillis of an admission's reply (its
// refund's receipt); 0 when the reply cannot be read, which the refund
// programs treat as a stale receipt (nothing given back: the safe side).
func effectiveNow(res send.Sent, p ratelimit.Policy) int64 {
	r, ok := res.(send.Replied)
	if !ok {
		return 0
	}
	rep, err := programs.Decode(r.Reply, p)
	if err != nil {
		return 0
	}
	return rep.EffectiveNowMillis
}

// withCause returns the failure o with err (when not nil) joined to its
// cause; an Evaluated o is returned as it is.
func withCause(o ratelimit.Outcome, err error) ratelimit.Outcome {
	if err == nil {
		return o
	}
	switch v := o.(type) {
	case ratelimit.Evaluated:
		return v
	case ratelimit.Unavailable:
		v.Cause = errors.Join(v.Cause, err)
		return v
	case ratelimit.Indeterminate:
		v.Cause = errors.Join(v.Cause, err)
		return v
	case ratelimit.Incompatible:
		v.Cause = errors.Join(v.Cause, err)
		return v
	}
	return o
}

// firstMember is the set's first member, "" for none.
func firstMember(req ratelimit.SetRequest) ratelimit.PolicyID {
	if len(req.Members) == 0 {
		return ""
	}
	return req.Members[0]
}
