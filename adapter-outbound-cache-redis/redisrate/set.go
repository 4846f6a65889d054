package redisrate

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/internal/send"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/programs"
	"github.com/tech-log/tech-log-backend/shared-contract/keyspace"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

var _ ratelimit.EdgePort = (*Provider)(nil)

// ErrRefundFailed is wrapped by the Cause of a set's failure outcome when
// a member admitted before it could not be given back: that charge stays,
// which can only under-admit (ADR 0027). SetRefundFailures counts them.
var ErrRefundFailed = errors.New("refund of an earlier member failed; its charge stays")

// EvaluateSet implements ratelimit.EdgePort (ADR 0027): every member goes
// through Evaluate's precheck with its own subject and cost
// (SetRequest.Member; the first refusal answers the set, nothing sent),
// and no two may count one key (SetRequest.ValidateScoped); then the members are decided group by group, a group being the
// members whose keys share a slot (on a standalone or Sentinel server,
// every member): a group of several in one call of the set program (ADR
// 0026), which writes nothing unless every one of them admits, a group of
// one by its own decision program. The groups go in the order of their
// first member, most specific first, until one does not admit; the members
// admitted by earlier groups are then given back (their refund programs,
// ADR 0025, newest first) and the set's outcome is that group's: denied
// (Evaluated, with every decision so far in Members) or the failure of its
// first member that failed. So no member ever admits beyond its limit;
// between an earlier group's admission and its refund another request may
// find it charged (under-admission only), and a refund that fails leaves
// the charge (counted; the failure's Cause wraps ErrRefundFailed).
func (p *Provider) EvaluateSet(ctx context.Context, req ratelimit.SetRequest) (out ratelimit.Outcome) {
	defer ratelimit.Recover(&out, req.FirstMember(), "redisrate")
	if ctx == nil {
		return p.unavailable(req.FirstMember().Known(), ratelimit.CategoryInvalidRequest, errNilContext)
	}
	if err := req.Validate(); err != nil {
		return p.unavailable(req.FirstMember().Known(), ratelimit.CategoryInvalidRequest, err)
	}
	members := make([]setMember, len(req.Members))
	pols := make([]ratelimit.Policy, len(req.Members))
	for i := range req.Members {
		m := req.Member(i)
		c, refused := p.precheck(ctx, m)
		if refused != nil {
			return refused
		}
		// The contract's set-member rule; a dedup window only goes unused
		// here (a set carries no evaluation ID).
		if err := ratelimit.CanJoinSet(c.policy.policy); errors.Is(err, ratelimit.ErrSetMemberQueue) {
			return p.unavailable(req.Members[i], ratelimit.CategoryInvalidRequest, fmt.Errorf("redisrate: %w", err))
		}
		members[i], pols[i] = setMember{checked: c, index: i, cost: m.Cost}, c.policy.policy
	}
	// One key twice in one program call would be read twice before
	// either write, and admitted twice.
	if err := req.ValidateScoped(pols); err != nil {
		return p.unavailable(req.FirstMember().Known(), ratelimit.CategoryInvalidRequest, err)
	}
	decided := make([]memberDecision, 0, len(members))
	var taken []admission
	for _, g := range p.groups(members) {
		outs := p.decideGroup(ctx, g)
		var failed ratelimit.Outcome
		allowed := true
		for i, o := range outs {
			ev, ok := o.(ratelimit.Evaluated)
			if !ok {
				if failed == nil {
					failed = o
				}
				allowed = false
				continue
			}
			decided = append(decided, memberDecision{index: g[i].index, d: ev.Decision})
			allowed = allowed && ev.Decision.Allowed
			if ev.Decision.Allowed {
				// The receipt's instant is the reply's effectiveNowMillis.
				taken = append(taken, admission{c: g[i], at: ev.Decision.Receipt.AtMillis()})
			}
		}
		if allowed {
			continue
		}
		// The group wrote nothing (a set call admits all or none; a single
		// call that did not admit wrote nothing): give back the groups
		// before it.
		taken = taken[:len(taken)-countAllowed(outs)]
		refundErr := p.giveBack(ctx, taken)
		if failed != nil {
			return withCause(failed, refundErr)
		}
		return setOutcome(decided)
	}
	return setOutcome(decided)
}

// setMember is a prechecked member of a set: its index in the request
// and its own cost (SetRequest.Member).
type setMember struct {
	checked
	index int
	cost  int64
}

// memberDecision is the decision of the member at index.
type memberDecision struct {
	index int
	d     ratelimit.Decision
}

// setOutcome is the Evaluated outcome of a set: the members decided, in
// request order (groups decide members of one slot together, which may
// not be the order they were asked in; a policy may repeat, so the order
// is the members' index, not their policy), and Deciding's member.
func setOutcome(decided []memberDecision) ratelimit.Outcome {
	slices.SortFunc(decided, func(a, b memberDecision) int { return a.index - b.index })
	ds := make([]ratelimit.Decision, len(decided))
	for i, md := range decided {
		ds[i] = md.d
	}
	return ratelimit.Evaluated{Decision: ds[ratelimit.Deciding(ds)], Members: ds}
}

// groups splits members into the groups decided by one call each, in the
// order of their first member: by slot in a cluster, all of them
// otherwise (one server holds every key).
func (p *Provider) groups(members []setMember) [][]setMember {
	if p.router == nil && !p.callPerMember {
		return [][]setMember{members}
	}
	var out [][]setMember
	slots := map[int]int{}
	for _, c := range members {
		s := keyspace.Slot(c.key)
		if p.callPerMember {
			s = len(out) // every member its own group
		}
		i, ok := slots[s]
		if !ok {
			i = len(out)
			slots[s] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], c)
	}
	return out
}

// decideGroup decides g in one call and returns each member's outcome (an
// admission's receipt holds the instant it was made at): a single
// member by its decision program, several by the set program, whose reply
// is split into the members' replies and mapped as a single call's (so
// replication acks and every refusal are judged per member exactly as for
// Evaluate), each with its own cost. A call that failed is every
// member's failure.
func (p *Provider) decideGroup(ctx context.Context, g []setMember) []ratelimit.Outcome {
	outs := make([]ratelimit.Outcome, len(g))
	if len(g) == 1 {
		c := g[0]
		res := p.exec.Run(ctx, send.Call{Script: c.policy.script, Key: c.key, Argv: c.policy.boundArgv, Cost: c.cost, CostArg: programs.ArgCost, SendBy: c.sendBy})
		outs[0] = p.outcome(c.policy, res, c.cost)
		return outs
	}
	keys, pols := make([]string, len(g)), make([]ratelimit.Policy, len(g))
	parts, costs := make([]programs.SetMember, len(g)), make([]int64, len(g))
	for i, c := range g {
		keys[i], pols[i], parts[i], costs[i] = c.key, c.policy.policy, c.policy.setMember, c.cost
	}
	res := p.exec.RunSet(ctx, send.Call{Script: p.setScript, Keys: keys, Argv: programs.AppendSetArgsCosts(nil, parts, costs), SendBy: g[0].sendBy})
	r, ok := res.(send.Replied)
	if !ok || r.Err != nil {
		o := p.outcome(g[0].policy, res, g[0].cost)
		for i := range outs {
			outs[i] = o
		}
		return outs
	}
	if _, _, err := programs.DecodeSet(r.Reply, pols); err != nil {
		o := ratelimit.Incompatible{PolicyID: g[0].policy.policy.ID(), Category: ratelimit.CategoryMalformedReply, Cause: err}
		for i := range outs {
			outs[i] = o
		}
		return outs
	}
	arr := r.Reply.([]any) // DecodeSet checked the shape
	for i, c := range g {
		member := send.Replied{Reply: arr[2+i*programs.ReplyLen : 2+(i+1)*programs.ReplyLen], Command: r.Command, Acked: r.Acked, AckErr: r.AckErr}
		outs[i] = p.replyOutcome(c.policy, member, c.cost)
	}
	return outs
}

// countAllowed is the number of allowed Evaluated outcomes in outs.
func countAllowed(outs []ratelimit.Outcome) int {
	n := 0
	for _, o := range outs {
		if ratelimit.Admitted(o) {
			n++
		}
	}
	return n
}

// SetRefundFailures is the number of set members whose refund failed
// (their charge stayed: under-admission only), since New.
func (p *Provider) SetRefundFailures() uint64 { return p.refundFailures.Load() }

// admission is a set member the program admitted: its checked request
// with its cost, and the instant it admitted at (the reply's
// effectiveNowMillis, the refund's receipt).
type admission struct {
	c  setMember
	at int64
}

// giveBack refunds taken, newest first, each by its policy's refund
// program sent once, on a context that outlives the caller's (a client
// that went away still gets its members given back) and with one command
// timeout of its own, each admission's own cost given back. It returns
// nil when every refund ran, or an error wrapping ErrRefundFailed.
func (p *Provider) giveBack(ctx context.Context, taken []admission) error {
	if len(taken) == 0 {
		return nil
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*p.timeout)
	defer cancel()
	var errs []error
	for i := len(taken) - 1; i >= 0; i-- {
		a := taken[i]
		ps := a.c.policy
		// BoundRefundArgs holds the cost already: the ARGV goes as built.
		err := refunded(p.exec.Run(rctx, send.Call{Script: ps.refund, Key: a.c.key, Argv: programs.BoundRefundArgs(ps.policy, a.c.cost, a.at), SendBy: p.now().Add(p.timeout)}))
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
