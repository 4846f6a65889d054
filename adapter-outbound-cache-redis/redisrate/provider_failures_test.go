package redisrate

import (
	"context"
	"io"
	"net"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/internal/send"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// TestEvaluateMapsCallFailures: a failed call becomes the classifier's
// outcome, with the retry hint and a CallError cause.
func TestEvaluateMapsCallFailures(t *testing.T) {
	readTimeout := &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
	tests := []struct {
		name    string
		r       fakeReply
		kind    ratelimit.OutcomeKind
		cat     ratelimit.Category
		written bool
	}{
		{"read timeout", fakeReply{err: readTimeout}, ratelimit.KindIndeterminate, ratelimit.CategoryTimeout, true},
		{"handshake read timeout", fakeReply{err: readTimeout, unwritten: true}, ratelimit.KindUnavailable, ratelimit.CategoryConnection, false},
		{"eof after write", fakeReply{err: io.EOF}, ratelimit.KindIndeterminate, ratelimit.CategoryConnectionLost, true},
		{"pool timeout", fakeReply{err: redis.ErrPoolTimeout, unwritten: true}, ratelimit.KindUnavailable, ratelimit.CategoryAdmission, false},
		{"oom", fakeReply{err: serverError(msgOOM)}, ratelimit.KindUnavailable, ratelimit.CategoryServerRejected, true},
		{"lua error", fakeReply{err: serverError("ERR user_script:9: x" + scriptSuffix)}, ratelimit.KindIncompatible, ratelimit.CategoryProgramFault, true},
		{"nil reply", fakeReply{err: redis.Nil}, ratelimit.KindIncompatible, ratelimit.CategoryMalformedReply, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeCommander{respond: func(int, sentCommand) fakeReply { return tt.r }}
			out := fakeProvider(t, f, 4).Evaluate(context.Background(), request("sw", subjectA, 1, t0))
			assert.Equal(t, tt.kind, out.Kind())
			assert.Equal(t, tt.cat, ratelimit.CategoryOf(out))
			assert.Equal(t, ratelimit.PolicyID("sw"), policyIDOf(out))
			var cause error
			switch v := out.(type) {
			case ratelimit.Evaluated: // no cause
			case ratelimit.Unavailable:
				assert.Equal(t, MinFailureRetryAfter, v.RetryAfter)
				cause = v.Cause
			case ratelimit.Indeterminate:
				assert.Equal(t, MinFailureRetryAfter, v.RetryAfter)
				cause = v.Cause
			case ratelimit.Incompatible:
				cause = v.Cause
			}
			var ce *CallError
			require.ErrorAs(t, cause, &ce)
			assert.Equal(t, tt.written, ce.Written)
			assert.Equal(t, send.CmdEvalSha, ce.Command)
			assert.Equal(t, "rate-sliding-counter-v1", ce.Program)
			assert.ErrorIs(t, cause, tt.r.err)
			assert.Len(t, f.commands(), 1)
		})
	}
}

func TestEvaluateNoScriptFallsBackOnce(t *testing.T) {
	pol := fixedPolicy(t, "fw", 5, time.Minute)
	f := &fakeCommander{respond: func(i int, _ sentCommand) fakeReply {
		if i == 0 {
			return fakeReply{err: redis.ErrNoScript}
		}
		return fakeReply{val: modelReply(pol, t0, 1)}
	}}
	out := fakeProvider(t, f, 4).Evaluate(context.Background(), request("fw", subjectA, 1, t0))
	assert.True(t, ratelimit.Admitted(out), "%v", out)
	assert.Equal(t, []string{send.CmdEvalSha, send.CmdEval}, f.names())
}

// TestEvaluateNoScriptWithTooLittleDeadlineLeftSendsNoEval: the deadline
// precheck applies to the fallback EVAL too; NOSCRIPT ran nothing, so the
// answer is Unavailable{deadline}.
func TestEvaluateNoScriptWithTooLittleDeadlineLeftSendsNoEval(t *testing.T) {
	var late atomic.Bool
	f := &fakeCommander{respond: func(int, sentCommand) fakeReply {
		late.Store(true) // the NOSCRIPT round trip took 9.5 command timeouts
		return fakeReply{err: redis.ErrNoScript}
	}}
	p, err := newProvider(f, testKeys(t), testPolicies(t), Options{CommandTimeout: testTimeout, MaxInFlight: 1, Now: func() time.Time {
		if late.Load() {
			return t0.Add(19 * testTimeout / 2)
		}
		return t0
	}})
	require.NoError(t, err)
	out := p.Evaluate(context.Background(), request("fw", subjectA, 1, t0))
	assert.Equal(t, ratelimit.KindUnavailable, out.Kind())
	assert.Equal(t, ratelimit.CategoryDeadline, ratelimit.CategoryOf(out))
	assert.ErrorIs(t, out.(ratelimit.Unavailable).Cause, errDeadlineTooShort)
	assert.Equal(t, []string{send.CmdEvalSha}, f.names())
}

func TestEvaluateRecoversFromPanics(t *testing.T) {
	f := &fakeCommander{panics: true}
	out := fakeProvider(t, f, 1).Evaluate(context.Background(), request("tb", subjectA, 1, t0))
	require.NotNil(t, out)
	i, ok := out.(ratelimit.Incompatible)
	require.True(t, ok, "%T", out)
	assert.Equal(t, ratelimit.CategoryProgramFault, i.Category)
	assert.Equal(t, ratelimit.PolicyID("tb"), i.PolicyID)
	assert.ErrorIs(t, i.Cause, errPanic)
}

func TestEvaluateRecoversFromPanicsHoldingTheSlot(t *testing.T) {
	f := &fakeCommander{panics: true}
	p := fakeProvider(t, f, 1)
	for i := 0; i < 3; i++ {
		assert.Equal(t, ratelimit.CategoryProgramFault, ratelimit.CategoryOf(p.Evaluate(context.Background(), request("tb", subjectA, 1, t0))))
	}
	f.panics = false
	f.respond = func(int, sentCommand) fakeReply {
		return fakeReply{val: modelReply(tokenPolicy(t, "tb", 5, 1, time.Second), t0, 1)}
	}
	assert.True(t, ratelimit.Admitted(p.Evaluate(context.Background(), request("tb", subjectA, 1, t0))), "the semaphore slot was released")
}
