package send

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/internal/certainty"
)

// PreCharge is a charge program call sent right before a call's program,
// in one pipeline on the same connection (the provider's
// EvaluateAfterCharge):
// the server runs it first, so the program behind it counts the charge.
// It is sent with the call's first attempt only, never again (not with
// the EVAL after NOSCRIPT, a redirect or the dedup retry), and never in a
// batch. The charge goes as EVAL of its source: it cannot answer NOSCRIPT
// while the program behind it runs without it.
type PreCharge struct {
	Script *Script // the policy's charge program
	Argv   []any   // the policy's ARGV, sent with Units in place of Argv[UnitsArg]
	Units  int64
	// UnitsArg is the caller's index of the cost in Argv (programs.ArgCost).
	UnitsArg int

	// Set by the executor when it was sent: its reply or error.
	Sent  bool
	Reply any
	Err   error
}

// command builds pc's EVAL on key.
func (pc *PreCharge) command(ctx context.Context, key string) *redis.Cmd {
	args := make([]any, 0, 4+len(pc.Argv))
	args = append(args, CmdEval, pc.Script.source, 1, key)
	n := len(args)
	args = append(args, pc.Argv...)
	args[n+pc.UnitsArg] = pc.Units
	return redis.NewCmd(ctx, args...)
}

// takePre returns c's charge (c.pre, not nil) and its command, once: the
// first send of c carries it, later sends of c (EVAL after NOSCRIPT,
// redirects) do not. send calls it only when c carries a charge, so a call
// without one never runs this file.
func (x *Executor) takePre(ctx context.Context, c *call) (*PreCharge, *redis.Cmd) {
	pc := c.pre
	c.pre = nil
	pc.Sent = true
	return pc, pc.command(ctx, c.key)
}

// collectPre records the charge's reply or error once go-redis has
// processed it.
func collectPre(pc *PreCharge, cmd *redis.Cmd) {
	pc.Reply, pc.Err = cmd.Result()
	if arr, ok := pc.Reply.([]any); ok && arr != nil && pc.Err != nil && !certainty.IsServerReply(pc.Err) {
		// Its whole reply was read before a failure behind it, which
		// go-redis stamps on every command of the pipeline (as collect).
		pc.Err = nil
	}
}
