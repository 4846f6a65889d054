package redisrate

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/programs"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// replyArray renders a programs.Reply as the array go-redis returns.
func replyArray(r programs.Reply) []any {
	v := r.Ints()
	out := make([]any, len(v))
	for i, n := range v {
		out[i] = n
	}
	return out
}

// TestSetMemberFailingMidWay: the fault lane of a policy set (ADR 0027) on
// a fake server: the first member admits, the second's call fails after
// it was written (Indeterminate) or denies; the first member is then
// refunded by its refund program with the admission's instant; a refund
// whose reply is lost is counted and named in the failure's cause, and
// never retried.
func TestSetMemberFailingMidWay(t *testing.T) {
	pols := testPolicies(t) // fw (fixed 5/min), sw, tb (5, 1 per second)
	fw, tb := pols[0], pols[2]
	admit := replyArray(must(programs.Evaluate(fw, nil, t0.UnixMilli(), 1)))
	full := func() []any {
		_, st := programs.Evaluate(tb, nil, t0.UnixMilli(), 5)
		r, _ := programs.Evaluate(tb, st, t0.UnixMilli(), 1)
		require.Equal(t, programs.StatusDenied, r.Status)
		return replyArray(r)
	}()
	refundReply := []any{int64(1), t0.UnixMilli(), t0.UnixMilli(), int64(5), int64(5), int64(1), t0.UnixMilli()}
	bundle, err := programs.ForPolicy(fw)
	require.NoError(t, err)
	refundProg := bundle.Refund // the policy's bound refund program
	lost := fakeReply{err: io.EOF}
	for name, tc := range map[string]struct {
		second, refund fakeReply
		kind           ratelimit.OutcomeKind
		refundFailed   bool
	}{
		"second member lost after write": {second: lost, refund: fakeReply{val: refundReply}, kind: ratelimit.KindIndeterminate},
		"second member denies":           {second: fakeReply{val: full}, refund: fakeReply{val: refundReply}, kind: ratelimit.KindEvaluated},
		"refund reply lost":              {second: lost, refund: lost, kind: ratelimit.KindIndeterminate, refundFailed: true},
	} {
		t.Run(name, func(t *testing.T) {
			f := &fakeCommander{respond: func(i int, c sentCommand) fakeReply {
				switch i {
				case 0:
					return fakeReply{val: admit}
				case 1:
					return tc.second
				}
				return tc.refund
			}}
			p := fakeProvider(t, f, 4)
			p.callPerMember = true // the refund path, as across cluster slots
			s := randomSubject(t)
			out := p.EvaluateSet(context.Background(), ratelimit.SetRequest{Members: []ratelimit.PolicyID{"fw", "tb"}, SubjectDigest: s, Cost: 1, Deadline: t0.Add(10 * testTimeout)})
			assert.Equal(t, tc.kind, out.Kind(), "%v", out)
			assert.False(t, ratelimit.Admitted(out))
			cmds := f.commands()
			require.Len(t, cmds, 3, "two members, then one refund, never a retry: %v", f.names())
			fwKey, err := StateKey(p.keys, fw, s)
			require.NoError(t, err)
			assert.Equal(t, refundProg.SHA1, cmds[2].program, "the first member's refund program")
			assert.Equal(t, fwKey, cmds[2].key)
			argv := cmds[2].argv
			require.NotEmpty(t, argv)
			assert.Equal(t, admit[programs.ReplyEffectiveNow], argv[len(argv)-1], "the receipt: the admission's instant")
			if tc.refundFailed {
				assert.Equal(t, uint64(1), p.SetRefundFailures())
				assert.True(t, errors.Is(causeOf(out), ErrRefundFailed), "the cause names the failed refund: %v", causeOf(out))
			} else {
				assert.Zero(t, p.SetRefundFailures())
			}
			if tc.kind == ratelimit.KindEvaluated {
				ev := out.(ratelimit.Evaluated)
				require.Len(t, ev.Members, 2)
				assert.True(t, ev.Members[0].Allowed, "what fw answered")
				assert.Equal(t, ratelimit.PolicyID("tb"), ev.Decision.PolicyID, "the denying member speaks")
			}
		})
	}
}

func must(r programs.Reply, _ programs.State) programs.Reply { return r }

// TestSetRefusedBeforeSending: a set with an unknown member, a cost above
// a member's MaxCost or a repeated member sends nothing.
func TestSetRefusedBeforeSending(t *testing.T) {
	f := &fakeCommander{}
	p := fakeProvider(t, f, 4)
	s := randomSubject(t)
	for _, req := range []ratelimit.SetRequest{
		{Members: []ratelimit.PolicyID{"fw", "nope"}, SubjectDigest: s, Cost: 1, Deadline: t0.Add(time.Minute)},
		{Members: []ratelimit.PolicyID{"fw", "tb"}, SubjectDigest: s, Cost: 6, Deadline: t0.Add(time.Minute)},
		{Members: []ratelimit.PolicyID{"fw", "fw"}, SubjectDigest: s, Cost: 1, Deadline: t0.Add(time.Minute)},
		{Members: nil, SubjectDigest: s, Cost: 1, Deadline: t0.Add(time.Minute)},
	} {
		out := p.EvaluateSet(context.Background(), req)
		assert.Equal(t, ratelimit.KindUnavailable, out.Kind(), "%v: %v", req, out)
	}
	assert.Empty(t, f.commands(), "nothing sent")
}

// TestSetOneCallPerSlot: members whose keys share a slot (here a
// standalone server: all of them) are decided by one call of the set
// program with every key; its reply decides every member; a denied or
// failed set call sends nothing more (it wrote nothing, there is nothing
// to give back).
func TestSetOneCallPerSlot(t *testing.T) {
	pols := testPolicies(t)
	fw, tb := pols[0], pols[2]
	setProg := programs.SetProgram()
	admitFW := replyArray(must(programs.Evaluate(fw, nil, t0.UnixMilli(), 1)))
	admitTB := replyArray(must(programs.Evaluate(tb, nil, t0.UnixMilli(), 1)))
	_, full := programs.Evaluate(tb, nil, t0.UnixMilli(), 5)
	denyTB := replyArray(must(programs.Evaluate(tb, full, t0.UnixMilli(), 1)))
	setReply := func(status int64, members ...[]any) []any {
		out := []any{status, int64(len(members))}
		for _, m := range members {
			out = append(out, m...)
		}
		return out
	}
	for name, tc := range map[string]struct {
		reply    fakeReply
		kind     ratelimit.OutcomeKind
		allowed  bool
		category ratelimit.Category
	}{
		"admitted":          {reply: fakeReply{val: setReply(1, admitFW, admitTB)}, kind: ratelimit.KindEvaluated, allowed: true},
		"denied by tb":      {reply: fakeReply{val: setReply(2, admitFW, denyTB)}, kind: ratelimit.KindEvaluated},
		"lost after write":  {reply: fakeReply{err: io.EOF}, kind: ratelimit.KindIndeterminate, category: ratelimit.CategoryConnectionLost},
		"status disagrees":  {reply: fakeReply{val: setReply(1, admitFW, denyTB)}, kind: ratelimit.KindIncompatible, category: ratelimit.CategoryMalformedReply},
		"too short a reply": {reply: fakeReply{val: setReply(1, admitFW)}, kind: ratelimit.KindIncompatible, category: ratelimit.CategoryMalformedReply},
	} {
		t.Run(name, func(t *testing.T) {
			f := &fakeCommander{respond: func(int, sentCommand) fakeReply { return tc.reply }}
			p := fakeProvider(t, f, 4)
			s := randomSubject(t)
			out := p.EvaluateSet(context.Background(), ratelimit.SetRequest{Members: []ratelimit.PolicyID{"fw", "tb"}, SubjectDigest: s, Cost: 1, Deadline: t0.Add(10 * testTimeout)})
			require.Equal(t, tc.kind, out.Kind(), "%v", out)
			assert.Equal(t, tc.allowed, ratelimit.Admitted(out))
			if tc.category != "" {
				assert.Equal(t, tc.category, ratelimit.CategoryOf(out))
			}
			cmds := f.commands()
			require.Len(t, cmds, 1, "one call for both members: %v", f.names())
			assert.Equal(t, setProg.SHA1, cmds[0].program)
			fwKey, _ := StateKey(p.keys, fw, s)
			tbKey, _ := StateKey(p.keys, tb, s)
			assert.Equal(t, []any{2, fwKey, tbKey}, resolve(cmds[0].raw[2:5]), "numkeys and both keys")
			assert.Equal(t, programs.SetArgs([]ratelimit.Policy{fw, tb}, 1), cmds[0].raw[5:], "the set ARGV")
			if tc.kind == ratelimit.KindEvaluated {
				ev := out.(ratelimit.Evaluated)
				require.Len(t, ev.Members, 2)
				if !tc.allowed {
					assert.Equal(t, ratelimit.PolicyID("tb"), ev.Decision.PolicyID)
					assert.Positive(t, ev.Decision.RetryAfter)
				}
			}
		})
	}
}

// TestRefundReplyLost: a refund whose reply is lost after it was sent is
// Indeterminate and sent once, never retried (a second run could give back
// units of another admission); the charge may stay, which only
// under-admits (ADR 0025). This is the edge's path when a client leaves a
// leaky-bucket queue (ADR 0028).
func TestRefundReplyLost(t *testing.T) {
	fw := testPolicies(t)[0]
	f := &fakeCommander{respond: func(int, sentCommand) fakeReply { return fakeReply{err: io.EOF} }}
	p := fakeProvider(t, f, 4)
	req := ratelimit.Request{PolicyID: "fw", SubjectDigest: randomSubject(t), Cost: 1, Deadline: t0.Add(10 * testTimeout)}
	out := p.Refund(context.Background(), req, ratelimit.NewReceipt("fw", fw.Revision(), 1, t0.UnixMilli(), ratelimit.GlobalRedis))
	assert.Equal(t, ratelimit.KindIndeterminate, out.Kind(), "%v", out)
	require.Len(t, f.commands(), 1, "sent once, never retried: %v", f.names())
	bundle, err := programs.ForPolicy(fw)
	require.NoError(t, err)
	assert.Equal(t, bundle.Refund.SHA1, f.commands()[0].program, "the policy's bound refund program")
}
