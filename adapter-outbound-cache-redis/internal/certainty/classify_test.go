package certainty

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

var (
	unavailable   = func(c ratelimit.Category) Verdict { return Verdict{ratelimit.KindUnavailable, c} }
	indeterminate = func(c ratelimit.Category) Verdict { return Verdict{ratelimit.KindIndeterminate, c} }
	incompatible  = func(c ratelimit.Category) Verdict { return Verdict{ratelimit.KindIncompatible, c} }
)

// Realistic Redis 7.0 error replies, as redis-server sends them.
const (
	scriptSuffix = " script: 3ad0ab6a1a3a5e7e1f0b6e6c1e4b2a0a6f1e5a2b, on @user_script:57."
	msgOOM       = "OOM command not allowed when used memory > 'maxmemory'."
	msgReadOnly  = "READONLY You can't write against a read only replica."
	msgBusy      = "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSCRIPT."
)

// TestClassifyServerErrorReplies maps every server error prefix go-redis
// knows, plus OOM, BUSY, UNKILLABLE, NOSCRIPT, WRONGTYPE, NOAUTH,
// WRONGPASS, NOPERM and EXECABORT, to exactly one outcome.
func TestClassifyServerErrorReplies(t *testing.T) {
	tests := []struct {
		msg  string
		want Verdict
	}{
		// Refused before the script ran (no script suffix): known no mutation.
		{"NOPERM User limiter has no permissions to run the 'evalsha' command", unavailable(ratelimit.CategoryServerRejected)},
		{msgOOM, unavailable(ratelimit.CategoryServerRejected)},
		{msgReadOnly, unavailable(ratelimit.CategoryServerRejected)},
		{"LOADING Redis is loading the dataset in memory", unavailable(ratelimit.CategoryServerRejected)},
		{msgBusy, unavailable(ratelimit.CategoryServerRejected)},
		{"MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.", unavailable(ratelimit.CategoryServerRejected)},
		{"CLUSTERDOWN The cluster is down", unavailable(ratelimit.CategoryServerRejected)},
		{"NOREPLICAS Not enough good replicas to write.", unavailable(ratelimit.CategoryServerRejected)},
		{"TRYAGAIN Multiple keys request during rehashing of slot", unavailable(ratelimit.CategoryServerRejected)},
		{"EXECABORT Transaction discarded because of previous errors.", unavailable(ratelimit.CategoryServerRejected)},
		{"NOAUTH Authentication required.", unavailable(ratelimit.CategoryServerRejected)},
		{"WRONGPASS invalid username-password pair or user is disabled.", unavailable(ratelimit.CategoryServerRejected)},
		{"ERR max number of clients reached", unavailable(ratelimit.CategoryServerRejected)},
		// Raised inside the running script: a program fault, never a decision.
		{msgOOM + scriptSuffix, incompatible(ratelimit.CategoryProgramFault)},
		{msgReadOnly + scriptSuffix, incompatible(ratelimit.CategoryProgramFault)},
		{"WRONGTYPE Operation against a key holding the wrong kind of value" + scriptSuffix, incompatible(ratelimit.CategoryProgramFault)},
		{"WRONGTYPE Operation against a key holding the wrong kind of value", incompatible(ratelimit.CategoryProgramFault)},
		{"ERR user_script:1: Script attempted to access nonexistent global variable 'x'" + scriptSuffix, incompatible(ratelimit.CategoryProgramFault)},
		{"ERR Error running script (call to f_3ad0): @user_script:1: -READONLY You can't write against a read only replica.", incompatible(ratelimit.CategoryProgramFault)},
		// Unexpected answers to a program call: not proof of no mutation.
		{"NOSCRIPT No matching script. Please use EVAL.", incompatible(ratelimit.CategoryProgramFault)},
		{"UNKILLABLE Sorry the script already executed write commands against the dataset.", incompatible(ratelimit.CategoryProgramFault)},
		{"ERR unknown command 'evalsha'", incompatible(ratelimit.CategoryProgramFault)},
		{"ERR max number of clients", incompatible(ratelimit.CategoryProgramFault)},
		{"OOMX not a prefix", incompatible(ratelimit.CategoryProgramFault)},
		{"", incompatible(ratelimit.CategoryProgramFault)},
	}
	for _, tt := range tests {
		t.Run(tt.msg, func(t *testing.T) {
			assert.Equal(t, tt.want, Classify(serverError(tt.msg), true), "plain reply")
			// go-redis's typed errors (OOMError, ReadOnlyError, ...) are
			// redis.Error too and may be wrapped.
			assert.Equal(t, tt.want, Classify(fmt.Errorf("wrapped: %w", serverError(tt.msg)), true), "wrapped reply")
			// Before the call was serialized, an error reply can only be the
			// handshake's: the server refused the connection.
			assert.Equal(t, unavailable(ratelimit.CategoryServerRejected), Classify(serverError(tt.msg), false), "handshake reply")
		})
	}
}

func TestClassifyGoRedisSentinels(t *testing.T) {
	assert.Equal(t, incompatible(ratelimit.CategoryProgramFault), Classify(redis.ErrNoScript, true))
	assert.Equal(t, incompatible(ratelimit.CategoryMalformedReply), Classify(redis.Nil, true), "a nil reply")
	assert.Equal(t, incompatible(ratelimit.CategoryMalformedReply), Classify(redis.Nil, false))
	assert.True(t, IsNoScript(redis.ErrNoScript))
	assert.True(t, IsNoScript(fmt.Errorf("x: %w", serverError("NOSCRIPT No matching script. Please use EVAL."))))
	assert.False(t, IsNoScript(serverError("ERR NOSCRIPT")))
	assert.False(t, IsNoScript(errors.New("NOSCRIPT not a server reply")))
	assert.False(t, IsNoScript(nil))
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

// TestClassifyTransportErrors covers each transport class on both sides of
// the write.
func TestClassifyTransportErrors(t *testing.T) {
	readTimeout := &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
	writeTimeout := &net.OpError{Op: "write", Net: "tcp", Err: os.ErrDeadlineExceeded}
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	reset := &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	pipe := &net.OpError{Op: "write", Net: "tcp", Err: os.NewSyscallError("write", syscall.EPIPE)}
	tests := []struct {
		name          string
		err           error
		before, after Verdict
	}{
		{"dial refused", &DialError{Err: refused}, unavailable(ratelimit.CategoryConnection), indeterminate(ratelimit.CategoryConnectionLost)},
		{"dial timeout", &DialError{Err: &net.OpError{Op: "dial", Err: timeoutErr{}}}, unavailable(ratelimit.CategoryConnection), indeterminate(ratelimit.CategoryTimeout)},
		{"dial ctx deadline", &DialError{Err: context.DeadlineExceeded}, unavailable(ratelimit.CategoryConnection), indeterminate(ratelimit.CategoryCancelled)},
		{"pool timeout", redis.ErrPoolTimeout, unavailable(ratelimit.CategoryAdmission), indeterminate(ratelimit.CategoryConnectionLost)},
		{"pool exhausted", redis.ErrPoolExhausted, unavailable(ratelimit.CategoryAdmission), indeterminate(ratelimit.CategoryConnectionLost)},
		{"client closed", redis.ErrClosed, unavailable(ratelimit.CategoryClosed), indeterminate(ratelimit.CategoryConnectionLost)},
		{"ctx cancelled", context.Canceled, unavailable(ratelimit.CategoryDeadline), indeterminate(ratelimit.CategoryCancelled)},
		{"ctx deadline", context.DeadlineExceeded, unavailable(ratelimit.CategoryDeadline), indeterminate(ratelimit.CategoryCancelled)},
		{"read timeout", readTimeout, unavailable(ratelimit.CategoryConnection), indeterminate(ratelimit.CategoryTimeout)},
		{"write timeout", writeTimeout, unavailable(ratelimit.CategoryConnection), indeterminate(ratelimit.CategoryTimeout)},
		{"eof", io.EOF, unavailable(ratelimit.CategoryConnection), indeterminate(ratelimit.CategoryConnectionLost)},
		{"unexpected eof", io.ErrUnexpectedEOF, unavailable(ratelimit.CategoryConnection), indeterminate(ratelimit.CategoryConnectionLost)},
		{"reset", reset, unavailable(ratelimit.CategoryConnection), indeterminate(ratelimit.CategoryConnectionLost)},
		{"broken pipe", pipe, unavailable(ratelimit.CategoryConnection), indeterminate(ratelimit.CategoryConnectionLost)},
		{"closed conn", net.ErrClosed, unavailable(ratelimit.CategoryConnection), indeterminate(ratelimit.CategoryConnectionLost)},
		{"protocol garbage", errors.New("redis: invalid reply: \"?\""), unavailable(ratelimit.CategoryConnection), indeterminate(ratelimit.CategoryConnectionLost)},
		{"handshake failure wrapped", fmt.Errorf("failed to initialize connection options: %w", io.EOF), unavailable(ratelimit.CategoryConnection), indeterminate(ratelimit.CategoryConnectionLost)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.before, Classify(tt.err, false), "before the write")
			assert.Equal(t, tt.after, Classify(tt.err, true), "after the write")
		})
	}
}

// FuzzClassify: after the write, Unavailable is only ever the answer to a
// server error reply with a pre-run prefix and no script marker; before it,
// never Indeterminate.
func FuzzClassify(f *testing.F) {
	for _, s := range []string{msgOOM, msgOOM + scriptSuffix, msgBusy, "ERR x", "NOSCRIPT x", "", "WRONGTYPE"} {
		f.Add(s, true, true)
		f.Add(s, false, false)
	}
	f.Fuzz(func(t *testing.T, msg string, asServerReply, written bool) {
		var err error = errors.New(msg)
		if asServerReply {
			err = serverError(msg)
		}
		v := Classify(err, written)
		require.Contains(t, []ratelimit.OutcomeKind{ratelimit.KindUnavailable, ratelimit.KindIndeterminate, ratelimit.KindIncompatible}, v.Kind)
		require.NotEmpty(t, v.Category)
		if !written {
			require.Equal(t, ratelimit.KindUnavailable, v.Kind)
			return
		}
		if v.Kind == ratelimit.KindUnavailable {
			require.True(t, asServerReply)
			require.True(t, PreRunRefusal(serverError(msg)), msg)
			require.NotContains(t, msg, ScriptRunMarker)
			require.NotContains(t, msg, ScriptErrorSuffixKey)
		}
		if !asServerReply {
			require.Equal(t, ratelimit.KindIndeterminate, v.Kind)
		}
	})
}

// serverError is a Redis error reply as go-redis surfaces it.
type serverError string

func (e serverError) Error() string { return string(e) }
func (serverError) RedisError()     {}

var _ redis.Error = serverError("")
