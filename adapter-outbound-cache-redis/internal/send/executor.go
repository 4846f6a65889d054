package send

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/internal/certainty"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/programs"
)

// Commander is the adapter's own view of go-redis: the one call the
// Executor and the provider make. Every redis.UniversalClient satisfies it;
// unit tests use a fake.
type Commander interface {
	Process(ctx context.Context, cmd redis.Cmder) error
}

// Command names of the structured executor.
const (
	CmdEvalSha = "evalsha"
	CmdEval    = "eval"
)

// wireArg is a command argument whose serialization is observable. go-redis
// writes a command only after it holds an initialized connection: it
// serializes the arguments into the connection's (empty) write buffer in
// order, calling MarshalBinary for this one, and flushes afterwards. So
// until MarshalBinary has run, no complete frame of the command (and, with a
// write buffer larger than the few bytes before this argument, no byte of
// it) can have reached the socket, and the server cannot have run it.
// After it has run, the command may have been sent.
//
// It is the second argument of EVALSHA (the digest) and EVAL (the source),
// so its payload is what Redis needs there anyway.
type wireArg struct {
	payload    []byte
	text       string
	serialized atomic.Bool
}

// MarshalBinary implements encoding.BinaryMarshaler for go-redis's writer.
func (a *wireArg) MarshalBinary() ([]byte, error) {
	a.serialized.Store(true)
	return a.payload, nil
}

// Payload is the argument's bytes without marking it serialized (for
// inspection; go-redis's writer calls MarshalBinary).
func (a *wireArg) Payload() []byte { return a.payload }

// String keeps fmt (go-redis's fallback for argument text) away from the
// atomic field; it is the digest or the program name.
func (a *wireArg) String() string { return a.text }

// Script is one program prepared for the executor.
type Script struct {
	name   string
	sha    []byte // what EVALSHA sends
	shaHex string
	source []byte // what EVAL sends: the exact embedded bytes
}

func NewScript(p programs.Program) *Script {
	return &Script{name: p.Name, sha: []byte(p.SHA1), shaHex: p.SHA1, source: []byte(p.Source)}
}

// maxArgs is the room for an argument list without growing it: name,
// script, numkeys, the state and dedup keys, and 13 ARGV entries, more
// than any program takes (the longest decision ARGV, a leaky bucket's 8,
// plus a dedup program's 5; executor_test.go checks it against the
// programs package). A longer list is sent all the same, in a slice of
// its own.
const maxArgs = 5 + 13

// call holds the reusable per-call argument storage, so that building a
// command allocates nothing but go-redis's own Cmd.
type call struct {
	program wireArg
	key     string
	args    [maxArgs]any
	// cost, when not 0, replaces ARGV entry costArg (Call.Cost).
	cost    int64
	costArg int
	// dedupKey is KEYS[2] of a dedup program call; evalID, when not "",
	// replaces ARGV entry evalIDArg (Call.EvalID).
	dedupKey  string
	evalID    string
	evalIDArg int
	// keys is set for a call over several keys (RunSet): every KEYS entry,
	// key being keys[0]; its argv is sent as given.
	keys []string

	// A call queued in a batcher (batch.go): what it sends, its caller's
	// context, its result, and ready, signalled once per queueing: true
	// when the turn passed to it (it leads the next batch), false when
	// another call's batch has stored res.
	req   batchReq
	ctx   context.Context
	res   Sent
	ready chan bool

	// pre, when set, is a charge sent ahead of the program in the same
	// pipeline (precharge.go); such a call is never batched.
	pre *PreCharge
}

// Executor sends program calls: the send loop (loop.go) over the targets
// its route gives (loop.go: one fixed target, or the cluster's
// primaries), each command written by send below. It is the only place
// that sends a program.
type Executor struct {
	route route
	// acks > 0 pipelines WAIT acks ackTimeoutMs right behind every program
	// command, on the same connection (opt-in replication acks).
	acks         int64
	ackTimeoutMs int64
	now          func() time.Time
	calls        sync.Pool // of *call
	// maxBatch > 1 turns batching on (batch.go): at most slots program
	// calls or batches at once per target, at most maxBatch calls per
	// batch.
	maxBatch, slots int
	// maxInFlight bounds the program calls on the wire per target
	// (loop.go; 0: no bound).
	maxInFlight int
	// breakerOpts configures every target's circuit breaker (breaker.go;
	// Threshold 0: none); onBreakerChange is told their changes; timeout
	// bounds a probe.
	breakerOpts     BreakerOptions
	onBreakerChange []func(BreakerState)
	timeout         time.Duration
	// breakersShut: ShutdownBreakers ran; a breaker made later is shut at
	// once (no prober outlives the provider).
	breakersShut atomic.Bool
}

// send writes one command on to and reports what happened. With asking (a
// cluster ASK redirect), to must be a *redis.Client: ASKING and the
// command go in one pipeline, so on one connection, as the redirect
// requires.
func (x *Executor) send(ctx context.Context, to Commander, c *call, command string, program []byte, text string, argv []any, asking bool) Sent {
	cmd := x.command(ctx, c, command, program, text, argv)
	var pre *redis.Cmd
	if c.pre != nil {
		// A charge goes with the call's first send only (precharge.go):
		// takePre clears c.pre.
		var pc *PreCharge
		pc, pre = x.takePre(ctx, c)
		defer collectPre(pc, pre)
	}
	var wait *redis.IntCmd
	if cl, ok := to.(*redis.Client); ok && (asking || x.acks > 0 || pre != nil) {
		pipe := cl.Pipeline()
		if pre != nil {
			_ = pipe.Process(ctx, pre)
		}
		if asking {
			_ = pipe.Process(ctx, redis.NewStatusCmd(ctx, "asking"))
		}
		_ = pipe.Process(ctx, cmd)
		if x.acks > 0 {
			wait = redis.NewIntCmd(ctx, "wait", x.acks, x.ackTimeoutMs)
			_ = pipe.Process(ctx, wait)
		}
		_, _ = pipe.Exec(ctx)
	} else {
		if pre != nil {
			_ = to.Process(ctx, pre) // a client that cannot pipeline (test fakes): just before
		}
		_ = to.Process(ctx, cmd)
	}
	return x.collect(c, cmd, command, wait)
}

// command builds c's program command: command (evalsha or eval) with
// program (digest or source) through c's wireArg, c's key (and dedup key),
// argv with c's cost (and evaluation ID) in the entries its caller named.
func (x *Executor) command(ctx context.Context, c *call, command string, program []byte, text string, argv []any) *redis.Cmd {
	c.program.payload, c.program.text = program, text
	c.program.serialized.Store(false)
	args := c.args[:0]
	name := commandArg(command)
	if c.keys != nil {
		args = append(args, name, &c.program, len(c.keys))
		for i := range c.keys {
			args = append(args, &c.keys[i]) // a pointer: boxing the string would allocate
		}
		return redis.NewCmd(ctx, append(args, argv...)...)
	}
	if c.dedupKey != "" {
		args = append(args, name, &c.program, 2, &c.key, &c.dedupKey)
	} else {
		args = append(args, name, &c.program, 1, &c.key)
	}
	n := len(args)
	args = append(args, argv...)
	if c.cost != 0 {
		args[n+c.costArg] = &c.cost
	}
	if c.evalID != "" {
		args[n+c.evalIDArg] = &c.evalID
	}
	return redis.NewCmd(ctx, args...)
}

// The command names as interface values, made once: converting a string
// variable to an interface allocates on every call.
var (
	evalShaArg any = CmdEvalSha
	evalArg    any = CmdEval
)

// commandArg is command as a command's first argument.
func commandArg(command string) any {
	switch command {
	case CmdEvalSha:
		return evalShaArg
	case CmdEval:
		return evalArg
	}
	return command
}

// collect reads the result of c's cmd once go-redis has processed it;
// wait is the WAIT pipelined behind it (nil if none was sent). It is the
// one place that decides what was sent: a reply or error reply (Replied),
// a failure after go-redis began writing the command (MayHaveRun), or
// one before (NotSent).
func (x *Executor) collect(c *call, cmd *redis.Cmd, command string, wait *redis.IntCmd) Sent {
	val, err := cmd.Result()
	if arr, ok := val.([]any); ok && arr != nil && err != nil && !certainty.IsServerReply(err) {
		// The whole array reply was read (go-redis keeps no partial
		// array), then the connection failed on a command behind it, and
		// go-redis stamped that failure on every command of the pipeline.
		// This command is decided by its reply.
		err = nil
	}
	written := c.program.serialized.Load()
	switch {
	case err != nil && !written && !errors.Is(err, redis.Nil):
		return NotSent{Reason: ReasonPreSend, Cause: err, Command: command}
	case err != nil && !certainty.IsServerReply(err) && !errors.Is(err, redis.Nil):
		return MayHaveRun{Cause: err, Command: command}
	}
	r := Replied{Reply: val, Err: err, Command: command}
	if x.acks > 0 {
		r.AckErr = ErrNoWait
		if wait != nil {
			r.Acked, r.AckErr = wait.Result()
		}
	}
	return r
}

// ErrNoWait: replication acks are required but the client cannot pipeline
// WAIT behind the program (not a *redis.Client).
var ErrNoWait = errors.New("WAIT not sent: the client cannot pipeline")

func (x *Executor) release(c *call) {
	c.program.payload, c.program.text = nil, ""
	c.program.serialized.Store(false)
	c.key, c.dedupKey, c.evalID, c.keys = "", "", "", nil
	c.cost, c.costArg, c.evalIDArg = 0, 0, 0
	clear(c.args[:])
	c.req, c.ctx, c.res, c.pre = batchReq{}, nil, nil, nil
	x.calls.Put(c)
}

// Name is the program's name, e.g. "rate-fixed-window-v1".
func (s *Script) Name() string { return s.name }

// SHA is the manifest digest EVALSHA sends, in hex.
func (s *Script) SHA() string { return s.shaHex }

// Source is the exact embedded source EVAL sends (SCRIPT LOAD loads it).
func (s *Script) Source() []byte { return s.source }
