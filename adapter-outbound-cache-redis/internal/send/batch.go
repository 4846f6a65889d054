package send

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// pipeliner is a client that can write several commands on one connection
// (*redis.Client, standalone or failover).
type pipeliner interface {
	Commander
	Pipeline() redis.Pipeliner
}

// batcher writes concurrent program calls together (docs/adr/0012): it
// holds slots connection turns. A call that finds a free slot is sent at
// once, alone, exactly as without batching. A call that finds every slot
// busy is queued; when a slot's call or batch completes, the slot passes
// to the head of the queue, which sends itself and whatever else is queued
// (at most maxBatch calls) as one go-redis pipeline: one write and one read
// on one connection. Nothing ever waits for more calls to arrive.
//
// Only first attempts are batched: an EVALSHA. The one EVAL after a
// NOSCRIPT reply, and the cluster redirects, are sent alone by the call's
// own goroutine (the send loop, loop.go). Certainty stays per command:
// every command carries its own wireArg, set when go-redis serializes it,
// and go-redis stamps a transport failure on the command it was reading
// and every later one, keeping the replies that arrived before it.
type batcher struct {
	x        *Executor
	client   pipeliner
	maxBatch int

	mu    sync.Mutex
	free  int     // free slots; > 0 only while queue is empty
	queue []*call // FIFO of calls waiting for a slot

	// batches and batched count the pipelines sent and the calls in them
	// (for tests and the benchmark).
	batches, batched atomic.Int64
}

func newBatcher(x *Executor, client pipeliner, slots, maxBatch int) *batcher {
	return &batcher{x: x, client: client, maxBatch: maxBatch, free: slots}
}

// batcherOf returns t's batcher when batching is on and t's client can
// pipeline, creating it on first use; nil otherwise.
func (x *Executor) batcherOf(t *Target) *batcher {
	if x.maxBatch <= 1 {
		return nil
	}
	if b := t.batch.Load(); b != nil {
		return b
	}
	pl, ok := t.client.(pipeliner)
	if !ok {
		return nil
	}
	t.batchOnce.Do(func() { t.batch.Store(newBatcher(x, pl, x.slots, x.maxBatch)) })
	return t.batch.Load()
}

// do sends c's EVALSHA, alone if a slot is free, else in the next batch,
// and returns its result. req holds what the call needs to be sent.
func (b *batcher) do(ctx context.Context, c *call, req batchReq) Sent {
	b.mu.Lock()
	if b.free > 0 {
		b.free--
		b.mu.Unlock()
		defer b.release()
		// Lone: at once, the path without batching.
		return b.x.send(ctx, b.client, c, CmdEvalSha, req.s.sha, req.s.shaHex, req.argv, false)
	}
	c.req, c.ctx = req, ctx
	b.queue = append(b.queue, c)
	b.mu.Unlock()
	if lead := <-c.ready; !lead {
		return c.res
	}
	// The slot passed to c: c sends itself and what is queued behind it.
	b.mu.Lock()
	batch := b.takeLocked(c)
	b.mu.Unlock()
	b.lead(ctx, batch)
	return c.res
}

// batchReq is what a queued call needs to be sent by another goroutine.
type batchReq struct {
	s      *Script
	argv   []any
	sendBy time.Time
}

// takeLocked returns head and up to maxBatch-1 queued calls, removing them
// from the queue. b.mu is held.
func (b *batcher) takeLocked(head *call) []*call {
	n := min(len(b.queue), b.maxBatch-1)
	batch := make([]*call, 0, n+1)
	batch = append(batch, head)
	batch = append(batch, b.queue[:n]...)
	clear(b.queue[:n])
	b.queue = b.queue[n:]
	if len(b.queue) == 0 {
		b.queue = b.queue[:0:0] // let the backing array go
	}
	return batch
}

// release ends a slot's turn: the slot passes to the head of the queue,
// or becomes free.
func (b *batcher) release() {
	b.mu.Lock()
	if len(b.queue) == 0 {
		b.free++
		b.mu.Unlock()
		return
	}
	head := b.queue[0]
	b.queue[0] = nil
	b.queue = b.queue[1:]
	b.mu.Unlock()
	head.ready <- true
}

// lead sends batch (batch[0] is the caller, holding the slot), stores each
// call's result in its res, passes the slot on and wakes the others. A
// call whose caller gave up (ctx done) or whose sendBy passed while it was
// queued is not sent: the deadline precheck holds at the moment of
// sending.
func (b *batcher) lead(ctx context.Context, batch []*call) {
	signalled := false
	defer func() {
		if signalled {
			return
		}
		// A panic while sending: nothing is known about any command.
		for _, c := range batch {
			c.res = MayHaveRun{Cause: ErrPanic, Command: CmdEvalSha}
		}
		b.release()
		for _, c := range batch[1:] {
			c.ready <- false
		}
	}()
	now := b.x.now()
	send := make([]*call, 0, len(batch))
	for _, c := range batch {
		cctx := ctx
		if c != batch[0] {
			cctx = c.ctx
		}
		switch {
		case cctx.Err() != nil:
			c.res = NotSent{Reason: ReasonDeadline, Cause: fmt.Errorf("waiting for a batch: %w", cctx.Err()), Command: CmdEvalSha}
		case now.After(c.req.sendBy):
			c.res = NotSent{Reason: ReasonDeadline, Cause: fmt.Errorf("waiting for a batch: %w", ErrDeadlineTooShort), Command: CmdEvalSha}
		default:
			send = append(send, c)
		}
	}
	switch len(send) {
	case 0:
	case 1:
		c := send[0]
		cctx := ctx
		if c != batch[0] {
			cctx = c.ctx // the leader's context may be done: not this call's
		}
		c.res = b.x.send(cctx, b.client, c, CmdEvalSha, c.req.s.sha, c.req.s.shaHex, c.req.argv, false)
	default:
		b.sendBatch(ctx, send)
	}
	signalled = true
	b.release()
	for _, c := range batch[1:] {
		c.ready <- false
	}
}

// sendBatch writes calls as one pipeline, WAIT last when replication acks
// are required (WAIT counts the replicas that acknowledged every write
// before it on the connection, so one WAIT covers the whole batch).
func (b *batcher) sendBatch(ctx context.Context, calls []*call) {
	x := b.x
	// The batch is not the leader's alone: its cancellation must not fail
	// the others. The pool wait is bounded by PoolTimeout, the socket by
	// the command timeout.
	ctx = context.WithoutCancel(ctx)
	pipe := b.client.Pipeline()
	cmds := make([]*redis.Cmd, len(calls))
	for i, c := range calls {
		cmds[i] = x.command(ctx, c, CmdEvalSha, c.req.s.sha, c.req.s.shaHex, c.req.argv)
		_ = pipe.Process(ctx, cmds[i])
	}
	var wait *redis.IntCmd
	if x.acks > 0 {
		wait = redis.NewIntCmd(ctx, "wait", x.acks, x.ackTimeoutMs)
		_ = pipe.Process(ctx, wait)
	}
	_, _ = pipe.Exec(ctx)
	b.batches.Add(1)
	b.batched.Add(int64(len(calls)))
	for i, c := range calls {
		c.res = x.collect(c, cmds[i], CmdEvalSha, wait)
	}
}
