package redisrate

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/internal/certainty"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/programs"
)

// preCharge is a charge program call sent right before a call's program,
// in one pipeline on the same connection (Provider.EvaluateAfterCharge):
// the server runs it first, so the program behind it counts the charge.
// It is sent with the call's first attempt only, never again (not with
// the EVAL after NOSCRIPT, a redirect or the dedup retry), and never in a
// batch. The charge goes as EVAL of its source: it cannot answer NOSCRIPT
// while the program behind it runs without it.
type preCharge struct {
	s     *script // the policy's charge program
	argv  []any   // the policy's ARGV; argv[programs.ArgCost] is replaced by units
	units int64
	// alone: no program behind it; the charge is the call (Provider.Charge).
	alone bool

	// Set by the executor when it was sent: its reply or error.
	sent  bool
	reply any
	err   error
}

// command builds pc's EVAL on key (or nil when pc is nil).
func (pc *preCharge) command(ctx context.Context, key string) *redis.Cmd {
	if pc == nil {
		return nil
	}
	args := make([]any, 0, 4+len(pc.argv))
	args = append(args, cmdEval, pc.s.source, programs.NumKeys, key)
	n := len(args)
	args = append(args, pc.argv...)
	args[n+programs.ArgCost] = pc.units
	return redis.NewCmd(ctx, args...)
}

// takePre returns c's charge command, once: the first send of c carries
// it, later sends of c (EVAL after NOSCRIPT, redirects) do not.
func (x *executor) takePre(ctx context.Context, c *call) (*preCharge, *redis.Cmd) {
	pc := c.pre
	if pc == nil {
		return nil, nil
	}
	c.pre = nil
	pc.sent = true
	return pc, pc.command(ctx, c.key)
}

// collectPre records the charge's reply or error once go-redis has
// processed it.
func collectPre(pc *preCharge, cmd *redis.Cmd) {
	if pc == nil {
		return
	}
	pc.reply, pc.err = cmd.Result()
	if arr, ok := pc.reply.([]any); ok && arr != nil && pc.err != nil && !certainty.IsServerReply(pc.err) {
		// Its whole reply was read before a failure behind it, which
		// go-redis stamps on every command of the pipeline (as collect).
		pc.err = nil
	}
}
