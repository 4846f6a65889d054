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
)

// noSendBy is a sendBy that never passes: the EVAL fallback is always sent.
var noSendBy = time.Unix(1<<40, 0)

func scriptFor(t testing.TB, p ratelimit.Policy) *script {
	t.Helper()
	prog, ok := programs.ForAlgorithm(p.Algorithm())
	require.True(t, ok)
	return newScript(prog)
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
			a := newExecutor(f, time.Now).run(context.Background(), newScript(prog), "k1", programs.Args(p, 1), 2, noSendBy)
			rep, ok := a.(replied)
			require.True(t, ok, "%#v", a)
			require.NoError(t, rep.err)
			assert.Equal(t, reply, rep.reply)
			assert.Equal(t, cmdEval, rep.command, "the reply is the EVAL's")

			sent := f.commands()
			require.Len(t, sent, 2)
			assert.Equal(t, cmdEvalSha, sent[0].name)
			assert.Equal(t, prog.SHA1, sent[0].program)
			assert.Equal(t, cmdEval, sent[1].name)
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
			a := newExecutor(f, clock).run(context.Background(), scriptFor(t, p), "k", programs.Args(p, 1), 1, noSendBy)
			assert.Equal(t, []string{cmdEvalSha}, f.names())
			err, written, command := sentFields(t, a)
			assert.Equal(t, tt.r.err, err)
			assert.Equal(t, !tt.r.unwritten, written)
			assert.Equal(t, cmdEvalSha, command)
		})
	}
}

func TestExecutorNoScriptWithoutFallbackSendsNothingMore(t *testing.T) {
	p := fixedPolicy(t, "fw", 5, time.Minute)
	f := &fakeCommander{respond: func(int, sentCommand) fakeReply { return fakeReply{err: redis.ErrNoScript} }}
	a := newExecutor(f, time.Now).run(context.Background(), scriptFor(t, p), "k", programs.Args(p, 1), 1, time.Time{})
	ns, ok := a.(notSent)
	require.True(t, ok, "%#v", a)
	assert.Equal(t, reasonDeadline, ns.reason, "NOSCRIPT ran nothing; no time for the EVAL")
	assert.ErrorIs(t, ns.cause, errDeadlineTooShort)
	assert.Equal(t, []string{cmdEvalSha}, f.names())
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
	a := newExecutor(f, time.Now).run(context.Background(), scriptFor(t, p), "k", programs.Args(p, 1), 1, noSendBy)
	m, ok := a.(mayHaveRun)
	require.True(t, ok, "%#v", a)
	assert.Equal(t, cmdEval, m.command)
	assert.Equal(t, readTimeout, m.cause)
	assert.Equal(t, []string{cmdEvalSha, cmdEval}, f.names(), "no second EVAL, no retry")
}

func TestExecutorArgumentsMatchProgramsArgs(t *testing.T) {
	for _, p := range testPolicies(t) {
		s := scriptFor(t, p)
		base := programs.Args(p, 1)
		for _, cost := range []int64{1, 2, 3, 5} {
			f := &fakeCommander{respond: func(int, sentCommand) fakeReply { return fakeReply{val: ints()} }}
			newExecutor(f, time.Now).run(context.Background(), s, "key", base, cost, noSendBy)
			sent := f.commands()
			require.Len(t, sent, 1)
			assert.Equal(t, programs.Args(p, cost), sent[0].argv, "%v cost %d", p.Algorithm(), cost)
		}
		assert.Equal(t, programs.Args(p, 1), base, "the per-policy ARGV is not modified")
	}
}

func TestExecutorReleaseClearsTheCall(t *testing.T) {
	x := newExecutor(&fakeCommander{}, time.Now)
	c := x.calls.Get().(*call)
	c.key, c.cost = "secret-key", 3
	c.program.payload, c.program.text = []byte("sha"), "sha"
	c.program.serialized.Store(true)
	c.args[3] = &c.key
	x.release(c)
	assert.Empty(t, c.key, "no key retained in the pool")
	assert.Nil(t, c.program.payload)
	assert.Empty(t, c.program.text)
	assert.False(t, c.program.serialized.Load())
	for _, a := range c.args {
		assert.Nil(t, a)
	}
}

// sentFields returns the error, whether the command may have been written,
// and the command of a send result, for assertions across variants.
func sentFields(t testing.TB, s sent) (err error, written bool, command string) {
	t.Helper()
	switch r := s.(type) {
	case notSent:
		return r.cause, false, r.command
	case mayHaveRun:
		return r.cause, true, r.command
	case replied:
		return r.err, true, r.command
	}
	t.Fatalf("unknown send result %T", s)
	return nil, false, ""
}
