package redisrate

// Tests that drive a real go-redis client against the fake RESP server
// (fakeserver_test.go): reply shapes and failures a real Redis does not
// produce on demand, with the failure falling on a known side of the write.

import (
	"bytes"
	"context"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
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

const wireTimeout = 300 * time.Millisecond

// maxClientsReply is what a server at maxclients sends on accepting a
// connection, before it reads any command.
const maxClientsReply = "ERR max number of clients reached"

func wireConfig(addr string) ClientConfig {
	return ClientConfig{
		Addr:           addr,
		Protocol:       ProtocolRESP2,
		CommandTimeout: wireTimeout,
		DialTimeout:    wireTimeout,
		PoolSize:       2,
		PoolTimeout:    100 * time.Millisecond,
	}
}

// wireProvider builds a Provider with a NewClient client for cfg.
func wireProvider(t testing.TB, cfg ClientConfig) *Provider {
	t.Helper()
	client, err := NewClient(cfg)
	require.NoError(t, err)
	p, err := New(client, testKeys(t), testPolicies(t), Options{CommandTimeout: cfg.CommandTimeout, MaxInFlight: cfg.PoolSize})
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func liveRequest(id ratelimit.PolicyID) ratelimit.Request {
	return ratelimit.Request{PolicyID: id, SubjectDigest: subjectA, Cost: 1, Deadline: time.Now().Add(10 * wireTimeout)}
}

// validWireReply is the model's reply for policy "fw" on an empty key now.
func validWireReply(t testing.TB) string {
	r, _ := programs.Evaluate(fixedPolicy(t, "fw", 5, time.Minute), nil, time.Now().UnixMilli(), 1)
	v := r.Ints()
	return respInts(v[:]...)
}

// TestWireReplyShapesAreIncompatible: whatever go-redis decodes from a reply
// of the wrong shape, the outcome is Incompatible{malformed_reply}, never an
// admission.
func TestWireReplyShapesAreIncompatible(t *testing.T) {
	nested := "*7\r\n:1\r\n*1\r\n:1\r\n:1\r\n:5\r\n:4\r\n:0\r\n:1\r\n"
	bulkDigit := "*7\r\n$1\r\n1\r\n:1\r\n:1\r\n:5\r\n:4\r\n:0\r\n:1\r\n"
	tests := map[string]string{
		"status":                 "+OK\r\n",
		"integer":                ":1\r\n",
		"nil bulk":               "$-1\r\n",
		"nil array":              "*-1\r\n",
		"resp3 null":             "_\r\n",
		"bulk digits":            "$1\r\n1\r\n",
		"empty array":            "*0\r\n",
		"six integers":           respInts(1, 2, 3, 4, 5, 6),
		"eight integers":         respInts(1, 2, 3, 4, 5, 6, 7, 8),
		"bulk digit element":     bulkDigit,
		"negative element":       respInts(1, -1, 0, 5, 4, 0, 1),
		"nested array":           nested,
		"resp3 map":              "%1\r\n+status\r\n:1\r\n",
		"resp3 double":           ",1.5\r\n",
		"resp3 boolean":          "#t\r\n",
		"huge bulk":              "$1048576\r\n" + strings.Repeat("1", 1<<20) + "\r\n",
		"unknown status":         respInts(9, 1, 1, 5, 4, 0, 1),
		"remaining above limit":  respInts(1, 1, 1, 5, 6, 0, 60000),
		"allowed with retry set": respInts(1, 1, 1, 5, 4, 7, 60000),
	}
	for name, raw := range tests {
		t.Run(name, func(t *testing.T) {
			srv := startRESP(t, func([]string) respAction { return respAction{reply: raw} })
			out := wireProvider(t, wireConfig(srv.Addr())).Evaluate(context.Background(), liveRequest("fw"))
			require.NotNil(t, out)
			assert.False(t, ratelimit.Admitted(out))
			assert.Equal(t, ratelimit.KindIncompatible, out.Kind(), "%v", out)
			assert.Equal(t, ratelimit.CategoryMalformedReply, ratelimit.CategoryOf(out), "%v", out)
			assert.Equal(t, 1, srv.Count(send.CmdEvalSha))
			assert.Zero(t, srv.Count(send.CmdEval))
		})
	}
	t.Run("valid", func(t *testing.T) {
		reply := validWireReply(t)
		srv := startRESP(t, func([]string) respAction { return respAction{reply: reply} })
		out := wireProvider(t, wireConfig(srv.Addr())).Evaluate(context.Background(), liveRequest("fw"))
		assert.True(t, ratelimit.Admitted(out), "%v", out)
	})
}

// TestWireFailureCertainty: each failure, injected on a known side of the
// write, gets the outcome that side allows. The handshake cases fail with
// the same go-redis error types as the post-write ones (a read timeout, an
// EOF); only the serialization marker tells them apart.
func TestWireFailureCertainty(t *testing.T) {
	hang := &respAction{hang: true}
	type want struct {
		kind     ratelimit.OutcomeKind
		cat      ratelimit.Category
		evalsha  int
		eval     int
		evalshaT bool // want an evalsha attempt recorded as written
	}
	oomReply := "-" + msgOOM + "\r\n"
	tests := []struct {
		name    string
		handler func(args []string) respAction
		opts    []func(*respServer)
		want    want
	}{
		{"closed on accept", nil, []func(*respServer){func(s *respServer) { s.onAccept = func(net.Conn) bool { return false } }},
			want{ratelimit.KindUnavailable, ratelimit.CategoryConnection, 0, 0, false}},
		{"handshake reply never comes", nil, []func(*respServer){func(s *respServer) { s.hello = hang }},
			want{ratelimit.KindUnavailable, ratelimit.CategoryConnection, 0, 0, false}},
		{"handshake probe never answered", nil, []func(*respServer){func(s *respServer) { s.ping = hang }},
			want{ratelimit.KindUnavailable, ratelimit.CategoryConnection, 0, 0, false}},
		{"maxclients greeting", nil, []func(*respServer){func(s *respServer) {
			s.onAccept = func(c net.Conn) bool { _, _ = c.Write([]byte("-" + maxClientsReply + "\r\n")); return false }
		}}, want{ratelimit.KindUnavailable, ratelimit.CategoryConnection, 0, 0, false}},
		{"authentication required", nil, []func(*respServer){func(s *respServer) {
			s.ping = &respAction{reply: "-NOAUTH Authentication required.\r\n"}
		}}, want{ratelimit.KindUnavailable, ratelimit.CategoryServerRejected, 0, 0, false}},
		{"evalsha reply never comes", func([]string) respAction { return respAction{hang: true} }, nil,
			want{ratelimit.KindIndeterminate, ratelimit.CategoryTimeout, 1, 0, true}},
		{"connection closed after evalsha", func([]string) respAction { return respAction{close: true} }, nil,
			want{ratelimit.KindIndeterminate, ratelimit.CategoryConnectionLost, 1, 0, true}},
		{"partial reply", func([]string) respAction { return respAction{reply: "*7\r\n:1\r\n", close: true} }, nil,
			want{ratelimit.KindIndeterminate, ratelimit.CategoryConnectionLost, 1, 0, true}},
		{"garbage reply", func([]string) respAction { return respAction{reply: "?garbage\r\n"} }, nil,
			want{ratelimit.KindIndeterminate, ratelimit.CategoryConnectionLost, 1, 0, true}},
		{"oom refusal", func([]string) respAction { return respAction{reply: oomReply} }, nil,
			want{ratelimit.KindUnavailable, ratelimit.CategoryServerRejected, 1, 0, true}},
		{"oom inside the script", func([]string) respAction { return respAction{reply: "-" + msgOOM + scriptSuffix + "\r\n"} }, nil,
			want{ratelimit.KindIncompatible, ratelimit.CategoryProgramFault, 1, 0, true}},
		{"noscript twice", func([]string) respAction {
			return respAction{reply: "-NOSCRIPT No matching script. Please use EVAL.\r\n"}
		}, nil,
			want{ratelimit.KindIncompatible, ratelimit.CategoryProgramFault, 1, 1, true}},
		{"noscript then eval reply never comes", func(args []string) respAction {
			if strings.EqualFold(args[0], send.CmdEvalSha) {
				return respAction{reply: "-NOSCRIPT No matching script. Please use EVAL.\r\n"}
			}
			return respAction{hang: true}
		}, nil, want{ratelimit.KindIndeterminate, ratelimit.CategoryTimeout, 1, 1, true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := tt.handler
			if h == nil {
				h = func([]string) respAction {
					t.Error("the program call must not reach the server")
					return respAction{close: true}
				}
			}
			srv := startRESP(t, h, tt.opts...)
			start := time.Now()
			out := wireProvider(t, wireConfig(srv.Addr())).Evaluate(context.Background(), liveRequest("fw"))
			elapsed := time.Since(start)
			require.NotNil(t, out)
			assert.False(t, ratelimit.Admitted(out))
			assert.Equal(t, tt.want.kind, out.Kind(), "%v", out)
			assert.Equal(t, tt.want.cat, ratelimit.CategoryOf(out), "%v", out)
			assert.Equal(t, tt.want.evalsha, srv.Count(send.CmdEvalSha), "evalsha sent")
			assert.Equal(t, tt.want.eval, srv.Count(send.CmdEval), "eval sent")
			if tt.want.kind != ratelimit.KindIncompatible {
				var ce *CallError
				require.ErrorAs(t, causeOf(out), &ce)
				assert.Equal(t, tt.want.evalshaT, ce.Written)
			}
			// Bounded: every failure ends within the few socket timeouts
			// a call can meet (handshake, probe, command, fallback).
			assert.Less(t, elapsed, 6*wireTimeout)
		})
	}
}

func causeOf(o ratelimit.Outcome) error {
	switch v := o.(type) {
	case ratelimit.Evaluated:
		return nil
	case ratelimit.Unavailable:
		return v.Cause
	case ratelimit.Indeterminate:
		return v.Cause
	case ratelimit.Incompatible:
		return v.Cause
	}
	return nil
}

func TestWireNoScriptFallsBackToOneEvalOfTheSource(t *testing.T) {
	reply := validWireReply(t)
	var mu sync.Mutex
	var evalArgs []string
	srv := startRESP(t, func(args []string) respAction {
		if strings.EqualFold(args[0], send.CmdEvalSha) {
			return respAction{reply: "-NOSCRIPT No matching script. Please use EVAL.\r\n"}
		}
		mu.Lock()
		evalArgs = args
		mu.Unlock()
		return respAction{reply: reply}
	})
	p := wireProvider(t, wireConfig(srv.Addr()))
	out := p.Evaluate(context.Background(), liveRequest("fw"))
	assert.True(t, ratelimit.Admitted(out), "%v", out)
	assert.Equal(t, []string{"hello", "ping", send.CmdEvalSha, send.CmdEval}, srv.Commands())
	prog, err := programs.Bind(p.policies["fw"].policy) // what the provider sends (ADR 0030)
	require.NoError(t, err)
	mu.Lock()
	defer mu.Unlock()
	require.GreaterOrEqual(t, len(evalArgs), 4)
	assert.Equal(t, prog.Source, evalArgs[1], "the exact source, shebang included")
	assert.Equal(t, "1", evalArgs[2])
}

func TestWireConnectionRefusedIsUnavailableFast(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	cfg := wireConfig(addr)
	cfg.CommandTimeout, cfg.DialTimeout = 2*time.Second, 2*time.Second
	t.Cleanup(func() { waitGoroutineGone(t, poolDialProber) }) // runs after p.Close (cleanups are LIFO)
	p := wireProvider(t, cfg)
	for i := 0; i < 5; i++ {
		req := liveRequest("tb")
		req.Deadline = time.Now().Add(5 * time.Second)
		start := time.Now()
		out := p.Evaluate(context.Background(), req)
		assert.Equal(t, ratelimit.KindUnavailable, out.Kind(), "%v", out)
		assert.Equal(t, ratelimit.CategoryConnection, ratelimit.CategoryOf(out))
		var de *certainty.DialError
		assert.ErrorAs(t, causeOf(out), &de)
		// A refusal is answered without waiting out the dial timeout.
		assert.Less(t, time.Since(start), cfg.DialTimeout)
	}
}

// faultConn fails the first Write whose bytes contain trigger, writing
// nothing of it.
type faultConn struct {
	net.Conn
	trigger []byte
	once    *sync.Once
}

func (c faultConn) Write(b []byte) (int, error) {
	fail := false
	if bytes.Contains(b, c.trigger) {
		c.once.Do(func() { fail = true })
	}
	if fail {
		return 0, &net.OpError{Op: "write", Net: "tcp", Err: os.NewSyscallError("write", syscall.ECONNRESET)}
	}
	return c.Conn.Write(b)
}

// TestWireWriteFailures: a write that fails is Unavailable when it was the
// handshake's and Indeterminate when it was the program call's, even though
// the failing write put no byte on the wire (go-redis does not say which
// connection or how many bytes; the marker errs towards Indeterminate).
func TestWireWriteFailures(t *testing.T) {
	tests := []struct {
		trigger string
		kind    ratelimit.OutcomeKind
		cat     ratelimit.Category
	}{
		{"hello", ratelimit.KindUnavailable, ratelimit.CategoryConnection},
		{"ping", ratelimit.KindUnavailable, ratelimit.CategoryConnection},
		{"evalsha", ratelimit.KindIndeterminate, ratelimit.CategoryConnectionLost},
	}
	for _, tt := range tests {
		t.Run(tt.trigger, func(t *testing.T) {
			reply := validWireReply(t)
			srv := startRESP(t, func([]string) respAction { return respAction{reply: reply} })
			var once sync.Once
			cfg := wireConfig(srv.Addr())
			cfg.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
				var d net.Dialer
				c, err := d.DialContext(ctx, network, addr)
				if err != nil {
					return nil, err
				}
				return faultConn{Conn: c, trigger: []byte("$" + strconv.Itoa(len(tt.trigger)) + "\r\n" + tt.trigger + "\r\n"), once: &once}, nil
			}
			p := wireProvider(t, cfg)
			out := p.Evaluate(context.Background(), liveRequest("fw"))
			assert.Equal(t, tt.kind, out.Kind(), "%v", out)
			assert.Equal(t, tt.cat, ratelimit.CategoryOf(out))
			assert.Zero(t, srv.Count(send.CmdEvalSha), "nothing of the call reached the server")
			// The next call, on a fresh connection, works.
			assert.True(t, ratelimit.Admitted(p.Evaluate(context.Background(), liveRequest("fw"))))
		})
	}
}

// TestWirePoolWaitFailuresAreBeforeTheWrite drives go-redis's own pool into
// ErrPoolTimeout and a cancelled wait (MaxInFlight normally prevents both):
// nothing was serialized, so both are Unavailable.
func TestWirePoolWaitFailuresAreBeforeTheWrite(t *testing.T) {
	srv := startRESP(t, func([]string) respAction { return respAction{hang: true} })
	cfg := wireConfig(srv.Addr())
	cfg.PoolSize = 1
	cfg.PoolTimeout = 100 * time.Millisecond
	client, err := NewClient(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.Close() })
	x := send.New(client, time.Now)
	pol := fixedPolicy(t, "fw", 5, time.Minute)
	s := scriptFor(t, pol)
	argv := programs.Args(pol, 1)

	held := make(chan send.Sent, 1)
	go func() {
		a := x.Run(context.Background(), send.Call{Script: s, Key: "k", Argv: argv, Cost: 1, CostArg: programs.ArgCost, SendBy: noSendBy})
		held <- a
	}()
	require.Eventually(t, func() bool { return srv.Count(send.CmdEvalSha) == 1 }, 5*time.Second, 5*time.Millisecond)

	err, written, _ := sentFields(t, x.Run(context.Background(), send.Call{Script: s, Key: "k", Argv: argv, Cost: 1, CostArg: programs.ArgCost, SendBy: noSendBy}))
	assert.ErrorIs(t, err, redis.ErrPoolTimeout)
	assert.False(t, written)
	assert.Equal(t, unavailable(ratelimit.CategoryAdmission), certainty.Classify(err, written))

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	err, written, _ = sentFields(t, x.Run(ctx, send.Call{Script: s, Key: "k", Argv: argv, Cost: 1, CostArg: programs.ArgCost, SendBy: noSendBy}))
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.False(t, written)
	assert.Equal(t, unavailable(ratelimit.CategoryDeadline), certainty.Classify(err, written))

	first, ok := (<-held).(send.MayHaveRun)
	require.True(t, ok, "the held call was written and timed out")
	assert.Equal(t, indeterminate(ratelimit.CategoryTimeout), certainty.Classify(first.Cause, true))
	assert.Equal(t, 1, srv.Count(send.CmdEvalSha), "the waiting calls sent nothing")
}

// TestWireRESP3ReplyIsTheSame: under RESP3 (HELLO 3 accepted) the program's
// reply still arrives as seven int64 and parses.
func TestWireRESP3ReplyIsTheSame(t *testing.T) {
	reply := validWireReply(t)
	hello3 := "%1\r\n$5\r\nproto\r\n:3\r\n"
	srv := startRESP(t, func([]string) respAction { return respAction{reply: reply} },
		func(s *respServer) { s.hello = &respAction{reply: hello3} })
	cfg := wireConfig(srv.Addr())
	cfg.Protocol = ProtocolRESP3
	out := wireProvider(t, cfg).Evaluate(context.Background(), liveRequest("fw"))
	assert.True(t, ratelimit.Admitted(out), "%v", out)
}

// TestWireContextEndingAfterTheWriteIsIgnored: with ContextTimeoutEnabled
// false go-redis does not abandon a written call when the caller's context
// ends; it reads the reply within the command timeout, so the connection
// stays in sync and the decision is real. The caller deadline is an
// admission precheck only.
func TestWireContextEndingAfterTheWriteIsIgnored(t *testing.T) {
	reply := validWireReply(t)
	srv := startRESP(t, func([]string) respAction { return respAction{reply: reply, delay: 150 * time.Millisecond} })
	p := wireProvider(t, wireConfig(srv.Addr()))
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for i := 0; i < 5000 && srv.Count(send.CmdEvalSha) == 0; i++ {
			time.Sleep(time.Millisecond)
		}
		cancel() // after the call was written
	}()
	out := p.Evaluate(ctx, liveRequest("fw"))
	assert.Error(t, ctx.Err(), "the context ended during the call")
	assert.True(t, ratelimit.Admitted(out), "%v", out)
	// The next call on the same connection reads its own reply.
	out = p.Evaluate(context.Background(), liveRequest("fw"))
	assert.True(t, ratelimit.Admitted(out), "%v", out)
	assert.Equal(t, 2, srv.Count(send.CmdEvalSha))
}
