package send

import (
	"context"
	"fmt"
	"time"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/internal/certainty"
)

// MaxClusterHops bounds the refusals one program call follows: MOVED, ASK,
// TRYAGAIN and CLUSTERDOWN replies (each sent before anything ran), and
// the NOSCRIPT that leads to the one EVAL.
const MaxClusterHops = 5

// clusterRetryPause is the pause before a program call is sent again after
// TRYAGAIN or CLUSTERDOWN.
const clusterRetryPause = 25 * time.Millisecond

// Run sends s for key with argv (the policy's ARGV; argv[programs.ArgCost]
// is replaced by cost) through the send loop.
func (x *Executor) Run(ctx context.Context, s *Script, key string, argv []any, cost int64, sendBy time.Time) Sent {
	return x.RunDedup(ctx, s, key, "", "", argv, cost, sendBy)
}

// RunDedup is Run for a dedup program (dedupKey not empty): KEYS are key
// and dedupKey, and id replaces the evaluation-ID placeholder of argv
// (programs.DedupArgs).
func (x *Executor) RunDedup(ctx context.Context, s *Script, key, dedupKey, id string, argv []any, cost int64, sendBy time.Time) Sent {
	return x.RunAfter(ctx, nil, s, key, dedupKey, id, argv, cost, sendBy)
}

// RunAfter is RunDedup with pre (optional) sent ahead of the program on
// the same connection, with the first attempt only (precharge.go).
func (x *Executor) RunAfter(ctx context.Context, pre *PreCharge, s *Script, key, dedupKey, id string, argv []any, cost int64, sendBy time.Time) Sent {
	c := x.calls.Get().(*call)
	defer x.release(c)
	c.key, c.cost = key, cost
	c.dedupKey, c.evalID = dedupKey, id
	c.pre = pre
	return x.loop(ctx, c, s, argv, sendBy)
}

// loop is the one send loop, for every topology (a standalone or Sentinel
// endpoint is a route with one fixed target). It picks the key's target,
// qualifies it if the route requires, sends the EVALSHA (batched when
// other calls wait for the target), and follows the refusals its route
// allows while sendBy has not passed and at most MaxClusterHops times:
// NOSCRIPT with exactly one EVAL of the source; MOVED, ASK (ASKING on the
// same connection), TRYAGAIN and CLUSTERDOWN in a cluster. Every refusal
// is a reply sent before anything ran; any other result ends the call, so
// a command that may have run is never sent again.
func (x *Executor) loop(ctx context.Context, c *call, s *Script, argv []any, sendBy time.Time) Sent {
	command, program, text := CmdEvalSha, s.sha, s.shaHex
	t, err := x.route.targetFor(ctx, c.key)
	if err != nil {
		return NotSent{Reason: ReasonPreSend, Cause: err, Command: command}
	}
	fellBack, asking := false, false
	var held *Target // the target whose in-flight token this call holds
	defer func() { x.releaseInFlight(held) }()
	for hop := 0; ; hop++ {
		if held != t {
			// A call holds one token, of the target it is sent to: a
			// redirect gives the old target's back first (a refusal: nothing
			// ran there). A target at its bound is not sent to.
			x.releaseInFlight(held)
			held = nil
			if !x.takeInFlight(t) {
				return NotSent{Reason: ReasonInFlight, Cause: ErrInFlightFull, Command: command}
			}
			held = t
		}
		record, admitted := x.breakerOf(t).admit()
		if !admitted {
			// The target's breaker is open: nothing is sent to it. In a
			// cluster the slot map is reloaded (a failover may have moved
			// the slot to a healthy primary).
			res := NotSent{Reason: ReasonBreakerOpen, Cause: ErrCircuitOpen, Command: command}
			x.route.lost(res)
			return res
		}
		res := x.attempt(ctx, t, c, hop, command, program, text, s, argv, sendBy, asking)
		record(res)
		rep, ok := res.(Replied)
		if !ok {
			x.route.lost(res)
			return res
		}
		if rep.Err == nil {
			return res
		}
		refusal, addr := certainty.Follow(rep.Err)
		if refusal == certainty.RefusalNoScript && fellBack {
			refusal = certainty.RefusalNone // NOSCRIPT after the EVAL: a fault
		}
		if refusal == certainty.RefusalNone || !x.route.follows(refusal) {
			return res
		}
		if x.now().After(sendBy) {
			if refusal == certainty.RefusalNoScript {
				// The server ran nothing; too little deadline is left.
				return NotSent{Reason: ReasonDeadline, Cause: fmt.Errorf("after NOSCRIPT: %w", ErrDeadlineTooShort), Command: CmdEval}
			}
			return res // a refusal: nothing ran
		}
		if hop+1 >= MaxClusterHops {
			return res
		}
		switch refusal {
		case certainty.RefusalNoScript:
			command, program, text, fellBack = CmdEval, s.source, s.name, true
		case certainty.RefusalMoved:
			if t, err = x.route.moved(c.key, addr); err != nil {
				return NotSent{Reason: ReasonPreSend, Cause: err, Command: command}
			}
			asking = false
		case certainty.RefusalAsk:
			if t, err = x.route.target(addr); err != nil {
				return NotSent{Reason: ReasonPreSend, Cause: err, Command: command}
			}
			asking = true
		case certainty.RefusalTryAgain, certainty.RefusalClusterDown:
			if !pause(ctx, clusterRetryPause) {
				return res
			}
			if refusal == certainty.RefusalClusterDown {
				if t, err = x.route.reload(ctx, c.key); err != nil {
					return res
				}
				asking = false
			}
		case certainty.RefusalNone: // returned above
		}
	}
}

// attempt qualifies t if its route requires it, then sends the call to it:
// batched on a first attempt when batching is on, alone otherwise (the EVAL
// and the redirects).
func (x *Executor) attempt(ctx context.Context, t *Target, c *call, hop int, command string, program []byte, text string, s *Script, argv []any, sendBy time.Time, asking bool) Sent {
	if err := x.route.Ensure(ctx, t); err != nil {
		return NotSent{Reason: ReasonPreSend, Cause: err, Command: command}
	}
	if b := x.batcherOf(t); hop == 0 && b != nil && c.pre == nil {
		return b.do(ctx, c, batchReq{s: s, argv: argv, sendBy: sendBy})
	}
	return x.send(ctx, t.client, c, command, program, text, argv, asking)
}

// pause waits d, or returns false when ctx is done first.
func pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
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
