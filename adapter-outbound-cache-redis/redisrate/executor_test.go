package redisrate

import (
	"context"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/programs"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/internal/certainty"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/internal/send"
)

// noSendBy is a sendBy that never passes: the EVAL fallback is always sent.
var noSendBy = time.Unix(1<<40, 0)

func scriptFor(t testing.TB, p ratelimit.Policy) *send.Script {
	t.Helper()
	prog, ok := programs.ForAlgorithm(p.Algorithm())
	require.True(t, ok)
	return send.NewScript(prog)
}

func TestExecutorFallsBackToExactlyOneEvalOnNoScript(t *testing.T) {
	for _, p := range testPolicies(t) {
		t.Run(p.Algorithm().String(), func(t *testing.T) {
			reply := modelReply(p, t0, 2)
			f := &fakeCommander{respond: func(i int, _ sentCommand) fakeReply {
				if i == 0 {
					return fakeReply{err: redis.ErrNoScript}
				}
				return fakeReply{val: reply}
			}}
			prog, _ := programs.ForAlgorithm(p.Algorithm())
			a := send.New(f, time.Now).Run(context.Background(), send.Call{Script: send.NewScript(prog), Key: "k1", Argv: programs.Args(p, 1), Cost: 2, CostArg: programs.ArgCost, SendBy: noSendBy})
			rep, ok := a.(send.Replied)
			require.True(t, ok, "%#v", a)
			require.NoError(t, rep.Err)
			assert.Equal(t, reply, rep.Reply)
			assert.Equal(t, send.CmdEval, rep.Command, "the reply is the EVAL's")

			sent := f.commands()
			require.Len(t, sent, 2)
			assert.Equal(t, send.CmdEvalSha, sent[0].name)
			assert.Equal(t, prog.SHA1, sent[0].program)
			assert.Equal(t, send.CmdEval, sent[1].name)
			assert.Equal(t, prog.Source, sent[1].program, "EVAL sends the exact embedded source")
			for _, c := range sent {
				assert.Equal(t, "k1", c.key)
				assert.Equal(t, programs.NumKeys, c.numKeys)
				assert.Equal(t, programs.Args(p, 2), c.argv, "same ARGV as programs.Args")
			}
		})
	}
}

func TestExecutorNeverEvalsAfterAnyOtherError(t *testing.T) {
	readTimeout := &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
	tests := []struct {
		name string
		r    fakeReply
	}{
		{"success", fakeReply{val: ints(1, 2, 3)}},
		{"read timeout", fakeReply{err: readTimeout}},
		{"eof", fakeReply{err: io.EOF}},
		{"ctx cancelled", fakeReply{err: context.Canceled}},
		{"pool timeout", fakeReply{err: redis.ErrPoolTimeout, unwritten: true}},
		{"dial", fakeReply{err: &certainty.DialError{Err: io.EOF}, unwritten: true}},
		{"oom", fakeReply{err: serverError(msgOOM)}},
		{"readonly", fakeReply{err: serverError(msgReadOnly)}},
		{"busy", fakeReply{err: serverError(msgBusy)}},
		{"lua runtime error", fakeReply{err: serverError("ERR user_script:1: boom" + scriptSuffix)}},
		{"wrongtype", fakeReply{err: serverError("WRONGTYPE Operation against a key holding the wrong kind of value")}},
		{"nil reply", fakeReply{err: redis.Nil}},
		{"noscript text that is not a server reply", fakeReply{err: io.ErrUnexpectedEOF}},
		{"noscript before the write (impossible, still no eval)", fakeReply{err: redis.ErrNoScript, unwritten: true}},
	}
	p := fixedPolicy(t, "fw", 5, time.Minute)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeCommander{respond: func(int, sentCommand) fakeReply { return tt.r }}
			clock := func() time.Time {
				t.Error("fallback must not be considered")
				return time.Now()
			}
			a := send.New(f, clock).Run(context.Background(), send.Call{Script: scriptFor(t, p), Key: "k", Argv: programs.Args(p, 1), Cost: 1, CostArg: programs.ArgCost, SendBy: noSendBy})
			assert.Equal(t, []string{send.CmdEvalSha}, f.names())
			err, written, command := sentFields(t, a)
			assert.Equal(t, tt.r.err, err)
			assert.Equal(t, !tt.r.unwritten, written)
			assert.Equal(t, send.CmdEvalSha, command)
		})
	}
}

func TestExecutorNoScriptWithoutFallbackSendsNothingMore(t *testing.T) {
	p := fixedPolicy(t, "fw", 5, time.Minute)
	f := &fakeCommander{respond: func(int, sentCommand) fakeReply { return fakeReply{err: redis.ErrNoScript} }}
	a := send.New(f, time.Now).Run(context.Background(), send.Call{Script: scriptFor(t, p), Key: "k", Argv: programs.Args(p, 1), Cost: 1, CostArg: programs.ArgCost, SendBy: time.Time{}})
	ns, ok := a.(send.NotSent)
	require.True(t, ok, "%#v", a)
	assert.Equal(t, send.ReasonDeadline, ns.Reason, "NOSCRIPT ran nothing; no time for the EVAL")
	assert.ErrorIs(t, ns.Cause, errDeadlineTooShort)
	assert.Equal(t, []string{send.CmdEvalSha}, f.names())
}

func TestExecutorEvalFailureIsTheResult(t *testing.T) {
	p := fixedPolicy(t, "fw", 5, time.Minute)
	readTimeout := &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
	f := &fakeCommander{respond: func(i int, _ sentCommand) fakeReply {
		if i == 0 {
			return fakeReply{err: redis.ErrNoScript}
		}
		return fakeReply{err: readTimeout}
	}}
	a := send.New(f, time.Now).Run(context.Background(), send.Call{Script: scriptFor(t, p), Key: "k", Argv: programs.Args(p, 1), Cost: 1, CostArg: programs.ArgCost, SendBy: noSendBy})
	m, ok := a.(send.MayHaveRun)
	require.True(t, ok, "%#v", a)
	assert.Equal(t, send.CmdEval, m.Command)
	assert.Equal(t, readTimeout, m.Cause)
	assert.Equal(t, []string{send.CmdEvalSha, send.CmdEval}, f.names(), "no second EVAL, no retry")
}

func TestExecutorArgumentsMatchProgramsArgs(t *testing.T) {
	for _, p := range testPolicies(t) {
		s := scriptFor(t, p)
		base := programs.Args(p, 1)
		for _, cost := range []int64{1, 2, 3, 5} {
			f := &fakeCommander{respond: func(int, sentCommand) fakeReply { return fakeReply{val: ints()} }}
			send.New(f, time.Now).Run(context.Background(), send.Call{Script: s, Key: "key", Argv: base, Cost: cost, CostArg: programs.ArgCost, SendBy: noSendBy})
			sent := f.commands()
			require.Len(t, sent, 1)
			assert.Equal(t, programs.Args(p, cost), sent[0].argv, "%v cost %d", p.Algorithm(), cost)
		}
		assert.Equal(t, programs.Args(p, 1), base, "the per-policy ARGV is not modified")
	}
}

// sentFields returns the error, whether the command may have been written,
// and the command of a send result, for assertions across variants.
func sentFields(t testing.TB, s send.Sent) (err error, written bool, command string) {
	t.Helper()
	switch r := s.(type) {
	case send.NotSent:
		return r.Cause, false, r.Command
	case send.MayHaveRun:
		return r.Cause, true, r.Command
	case send.Replied:
		return r.Err, true, r.Command
	}
	t.Fatalf("unknown send result %T", s)
	return nil, false, ""
}
