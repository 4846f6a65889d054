package redisrate

// Pipelined program calls (batch.go) against the fake RESP server: a call
// holds the only slot while the server withholds its reply (a gate), the
// next calls queue, and the gate's release makes the head of the queue
// write them all as one pipeline. Each certainty rule is checked per
// command of that batch.

import (
	"context"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/internal/send"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

const noScriptReply = "-NOSCRIPT No matching script. Please use EVAL.\r\n"

// batchRig is a provider with batching on (one slot) over a fake server
// whose first program call (the lone call A) is answered only when gate is
// closed; later program calls are answered by handler(i, args), i counting
// program calls from 1 (A is 0).
type batchRig struct {
	t       *testing.T
	srv     *respServer
	p       *Provider
	now     atomic.Int64 // the provider's clock, unix ms
	gate    chan struct{}
	release func()
	accepts atomic.Int32
}

func newBatchRig(t *testing.T, maxBatch int, handler func(i int, args []string) respAction, opts ...func(*respServer)) *batchRig {
	t.Helper()
	return newBatchRigA(t, maxBatch, respAction{reply: validWireReply(t)}, handler, opts...)
}

// newBatchRigA is newBatchRig with A answered by a (after the gate).
func newBatchRigA(t *testing.T, maxBatch int, a respAction, handler func(i int, args []string) respAction, opts ...func(*respServer)) *batchRig {
	t.Helper()
	r := &batchRig{t: t, gate: make(chan struct{})}
	r.now.Store(time.Now().UnixMilli())
	var once sync.Once
	r.release = func() { once.Do(func() { close(r.gate) }) }
	var calls atomic.Int32
	opts = append([]func(*respServer){func(s *respServer) {
		prev := s.onAccept
		s.onAccept = func(c net.Conn) bool {
			r.accepts.Add(1)
			return prev == nil || prev(c)
		}
	}}, opts...)
	r.srv = startRESP(t, func(args []string) respAction {
		i := int(calls.Add(1)) - 1
		if i == 0 {
			a.gate = r.gate
			return a
		}
		return handler(i, args)
	}, opts...)
	t.Cleanup(r.release) // before the server stops (cleanups run last-first)
	cfg := wireConfig(r.srv.Addr())
	cfg.PoolSize = 8
	cfg.CommandTimeout, cfg.DialTimeout = 2*time.Second, 2*time.Second // exact counts: every call decided by its reply
	client, err := NewClient(cfg)
	require.NoError(t, err)
	p, err := New(client, testKeys(t), testPolicies(t), Options{
		CommandTimeout: cfg.CommandTimeout, MaxInFlight: maxBatch, PipelineMaxBatch: maxBatch,
		Now: func() time.Time { return time.UnixMilli(r.now.Load()) },
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	slots, _ := p.exec.Batching()
	require.Equal(t, 1, slots, "MaxInFlight = PipelineMaxBatch: one slot")
	r.p = p
	return r
}

func (r *batchRig) request() ratelimit.Request {
	req := liveRequest("fw")
	req.Deadline = time.UnixMilli(r.now.Load()).Add(10 * time.Second)
	return req
}

func (r *batchRig) queued() int {
	return r.p.PipelineStats().Queued
}

// waitUntil polls cond for at most 5 s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("not reached within 5 s: %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// run sends A (held by the gate), then queued calls one by one (each
// waits until the previous one is queued, so the batch is in this order),
// runs between (optional) and opens the gate. It returns A's outcome and
// the queued calls' outcomes in order.
func (r *batchRig) run(queued int, between func()) (ratelimit.Outcome, []ratelimit.Outcome) {
	r.t.Helper()
	outs := make([]ratelimit.Outcome, queued+1)
	var wg sync.WaitGroup
	start := func(i int) {
		req := r.request()
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i] = r.p.Evaluate(context.Background(), req)
		}()
	}
	start(0)
	waitUntil(r.t, "A reached the server", func() bool { return r.srv.Count(send.CmdEvalSha) == 1 })
	for i := 1; i <= queued; i++ {
		start(i)
		waitUntil(r.t, "call queued", func() bool { return r.queued() == i })
	}
	if between != nil {
		between()
	}
	r.release()
	wg.Wait()
	return outs[0], outs[1:]
}

func (r *batchRig) stats() (batches, batched int64) {
	st := r.p.PipelineStats()
	return st.Batches, st.Calls
}

func TestBatchLoneCallIsSentAtOnceAlone(t *testing.T) {
	reply := validWireReply(t)
	r := newBatchRig(t, 4, func(int, []string) respAction { return respAction{reply: reply} })
	r.release()
	for range 3 {
		out := r.p.Evaluate(context.Background(), r.request())
		require.True(t, ratelimit.Admitted(out), "%v", out)
	}
	batches, _ := r.stats()
	assert.Zero(t, batches, "one call at a time: never a pipeline")
	assert.Equal(t, []string{"hello", "ping", send.CmdEvalSha, send.CmdEvalSha, send.CmdEvalSha}, r.srv.Commands())
}

func TestBatchQueuedCallsAreOnePipelineDecidedByTheirReplies(t *testing.T) {
	reply := validWireReply(t)
	r := newBatchRig(t, 4, func(int, []string) respAction { return respAction{reply: reply} })
	a, outs := r.run(3, nil)
	require.True(t, ratelimit.Admitted(a), "%v", a)
	for i, out := range outs {
		assert.True(t, ratelimit.Admitted(out), "call %d: %v", i, out)
	}
	batches, batched := r.stats()
	assert.Equal(t, int64(1), batches)
	assert.Equal(t, int64(3), batched)
	assert.Equal(t, 4, r.srv.Count(send.CmdEvalSha))
	assert.Equal(t, int32(1), r.accepts.Load(), "the batch went on the connection A released")
}

func TestBatchSizeIsBounded(t *testing.T) {
	reply := validWireReply(t)
	r := newBatchRig(t, 8, func(int, []string) respAction { return respAction{reply: reply} })
	r.p.exec.EnableBatching(1, 3) // one slot, 3 per batch (before the target's batcher exists)
	a, outs := r.run(5, nil)
	require.True(t, ratelimit.Admitted(a), "%v", a)
	for i, out := range outs {
		assert.True(t, ratelimit.Admitted(out), "call %d: %v", i, out)
	}
	batches, batched := r.stats()
	assert.Equal(t, int64(2), batches, "3 + 2")
	assert.Equal(t, int64(5), batched)
}

// TestBatchConnectionLostMidBatch: the server answers the first command of
// the batch and closes on the second. The first is decided by its reply;
// the second and the third were written (one flush) and are Indeterminate.
func TestBatchConnectionLostMidBatch(t *testing.T) {
	reply := validWireReply(t)
	r := newBatchRig(t, 4, func(i int, _ []string) respAction {
		if i == 1 {
			return respAction{reply: reply}
		}
		return respAction{close: true}
	})
	_, outs := r.run(3, nil)
	assert.True(t, ratelimit.Admitted(outs[0]), "%v", outs[0])
	for _, out := range outs[1:] {
		assert.Equal(t, ratelimit.KindIndeterminate, out.Kind(), "%v", out)
		assert.Equal(t, ratelimit.CategoryConnectionLost, ratelimit.CategoryOf(out), "%v", out)
		var ce *CallError
		require.ErrorAs(t, causeOf(out), &ce)
		assert.True(t, ce.Written)
	}
	assert.Zero(t, r.srv.Count(send.CmdEval), "nothing re-sent")
}

// TestBatchReplyNeverComes: the batch is written, no reply arrives: every
// command is Indeterminate{timeout}.
func TestBatchReplyNeverComes(t *testing.T) {
	r := newBatchRig(t, 4, func(int, []string) respAction { return respAction{hang: true} })
	_, outs := r.run(3, nil)
	for _, out := range outs {
		assert.Equal(t, ratelimit.KindIndeterminate, out.Kind(), "%v", out)
		assert.Equal(t, ratelimit.CategoryTimeout, ratelimit.CategoryOf(out), "%v", out)
	}
}

// TestBatchFailedBeforeAnyByteIsUnavailable: A's reply is garbage, so its
// connection is discarded; the batch needs a new connection and the server
// closes it at once: nothing of any command was serialized, so every
// command is Unavailable.
func TestBatchFailedBeforeAnyByteIsUnavailable(t *testing.T) {
	var n atomic.Int32
	r := newBatchRigA(t, 4, respAction{reply: "?garbage\r\n"}, func(int, []string) respAction {
		t.Error("no command of the batch may reach the server")
		return respAction{close: true}
	}, func(s *respServer) {
		s.onAccept = func(net.Conn) bool { return n.Add(1) == 1 } // only A's connection
	})
	a, outs := r.run(3, nil)
	assert.Equal(t, ratelimit.KindIndeterminate, a.Kind(), "%v", a)
	for _, out := range outs {
		assert.Equal(t, ratelimit.KindUnavailable, out.Kind(), "%v", out)
		assert.Equal(t, ratelimit.CategoryConnection, ratelimit.CategoryOf(out), "%v", out)
		var ce *CallError
		require.ErrorAs(t, causeOf(out), &ce)
		assert.False(t, ce.Written)
	}
	assert.Equal(t, 1, r.srv.Count(send.CmdEvalSha), "only A")
}

// TestBatchServerRefusalIsPerCommand: a pre-run refusal of one command is
// Unavailable for that command only.
func TestBatchServerRefusalIsPerCommand(t *testing.T) {
	reply := validWireReply(t)
	r := newBatchRig(t, 4, func(i int, _ []string) respAction {
		if i == 2 {
			return respAction{reply: "-" + msgOOM + "\r\n"}
		}
		return respAction{reply: reply}
	})
	_, outs := r.run(3, nil)
	assert.True(t, ratelimit.Admitted(outs[0]), "%v", outs[0])
	assert.Equal(t, ratelimit.KindUnavailable, outs[1].Kind(), "%v", outs[1])
	assert.Equal(t, ratelimit.CategoryServerRejected, ratelimit.CategoryOf(outs[1]))
	assert.True(t, ratelimit.Admitted(outs[2]), "%v", outs[2])
}

// TestBatchNoScriptLeadsToOneEvalForThatCommand: NOSCRIPT for the second
// command of a batch: exactly one EVAL, for it, and for no other.
func TestBatchNoScriptLeadsToOneEvalForThatCommand(t *testing.T) {
	reply := validWireReply(t)
	var evals atomic.Int32
	r := newBatchRig(t, 4, func(i int, args []string) respAction {
		if strings.EqualFold(args[0], send.CmdEval) {
			evals.Add(1)
			return respAction{reply: reply}
		}
		if i == 2 {
			return respAction{reply: noScriptReply}
		}
		return respAction{reply: reply}
	})
	_, outs := r.run(3, nil)
	for i, out := range outs {
		assert.True(t, ratelimit.Admitted(out), "call %d: %v", i, out)
	}
	assert.Equal(t, int32(1), evals.Load())
	assert.Equal(t, 1, r.srv.Count(send.CmdEval))
	assert.Equal(t, 4, r.srv.Count(send.CmdEvalSha))
}

// TestBatchDeadlinePassedWhileQueued: the precheck holds when the turn
// comes: a call whose send-by time passed while it was queued is
// Unavailable{deadline} and not sent.
func TestBatchDeadlinePassedWhileQueued(t *testing.T) {
	r := newBatchRig(t, 4, func(int, []string) respAction {
		t.Error("an expired call must not be sent")
		return respAction{close: true}
	})
	a, outs := r.run(3, func() { r.now.Add((time.Minute).Milliseconds()) })
	require.True(t, ratelimit.Admitted(a), "%v", a)
	for _, out := range outs {
		assert.Equal(t, ratelimit.KindUnavailable, out.Kind(), "%v", out)
		assert.Equal(t, ratelimit.CategoryDeadline, ratelimit.CategoryOf(out), "%v", out)
	}
	assert.Equal(t, 1, r.srv.Count(send.CmdEvalSha))
}

// TestBatchCancelledWhileQueued: a caller whose context ends while queued
// is not sent; the others of its batch are.
func TestBatchCancelledWhileQueued(t *testing.T) {
	reply := validWireReply(t)
	r := newBatchRig(t, 4, func(int, []string) respAction { return respAction{reply: reply} })
	outs := make([]ratelimit.Outcome, 3)
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wg.Add(1)
	go func() { defer wg.Done(); _ = r.p.Evaluate(context.Background(), r.request()) }()
	waitUntil(t, "A reached the server", func() bool { return r.srv.Count(send.CmdEvalSha) == 1 })
	for i := range outs {
		c := context.Background()
		if i == 1 {
			c = ctx
		}
		req := r.request()
		wg.Add(1)
		go func() { defer wg.Done(); outs[i] = r.p.Evaluate(c, req) }()
		waitUntil(t, "call queued", func() bool { return r.queued() == i+1 })
	}
	cancel()
	r.release()
	wg.Wait()
	assert.True(t, ratelimit.Admitted(outs[0]), "%v", outs[0])
	assert.Equal(t, ratelimit.KindUnavailable, outs[1].Kind(), "%v", outs[1])
	assert.Equal(t, ratelimit.CategoryDeadline, ratelimit.CategoryOf(outs[1]))
	assert.True(t, ratelimit.Admitted(outs[2]), "%v", outs[2])
	assert.Equal(t, 3, r.srv.Count(send.CmdEvalSha), "A and the two calls still wanted")
}

// TestBatchLeaderCancelledWhileQueued: the call that gets the turn was
// cancelled while queued: it is not sent, and the call behind it is sent
// with its own context, not the leader's.
func TestBatchLeaderCancelledWhileQueued(t *testing.T) {
	reply := validWireReply(t)
	r := newBatchRig(t, 4, func(int, []string) respAction { return respAction{reply: reply} })
	outs := make([]ratelimit.Outcome, 2)
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wg.Add(1)
	go func() { defer wg.Done(); _ = r.p.Evaluate(context.Background(), r.request()) }()
	waitUntil(t, "A reached the server", func() bool { return r.srv.Count(send.CmdEvalSha) == 1 })
	for i, c := range []context.Context{ctx, context.Background()} {
		req := r.request()
		wg.Add(1)
		go func() { defer wg.Done(); outs[i] = r.p.Evaluate(c, req) }()
		waitUntil(t, "call queued", func() bool { return r.queued() == i+1 })
	}
	cancel()
	r.release()
	wg.Wait()
	assert.Equal(t, ratelimit.KindUnavailable, outs[0].Kind(), "%v", outs[0])
	assert.Equal(t, ratelimit.CategoryDeadline, ratelimit.CategoryOf(outs[0]))
	assert.True(t, ratelimit.Admitted(outs[1]), "%v", outs[1])
	assert.Equal(t, 2, r.srv.Count(send.CmdEvalSha), "A and the call still wanted")
}

func TestBatchOptionsValidated(t *testing.T) {
	f := &fakeCommander{}
	for _, n := range []int{-1, MaxPoolSize + 1} {
		_, err := newProvider(f, testKeys(t), testPolicies(t), Options{CommandTimeout: testTimeout, MaxInFlight: 4, PipelineMaxBatch: n})
		require.ErrorIs(t, err, ErrInvalidConfig)
		assert.Contains(t, err.Error(), "PipelineMaxBatch")
	}
	for _, n := range []int{0, 1} {
		p, err := newProvider(f, testKeys(t), testPolicies(t), Options{CommandTimeout: testTimeout, MaxInFlight: 4, PipelineMaxBatch: n})
		require.NoError(t, err)
		_, maxBatch := p.exec.Batching()
		assert.Zero(t, maxBatch, "%d: off", n)
	}
}
