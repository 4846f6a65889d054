package redisrate

import (
	"context"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/internal/send"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/programs"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// evaluateDedup runs the policy's dedup program for a request with an
// evaluation ID and, when that call is Indeterminate because its reply was
// lost (timeout, connection lost), sends it once more with the same ID if
// the caller's deadline leaves a command timeout for it: the program
// answers the recorded decision if the first call admitted (using one of
// the ID's replays), so the request is charged at most once
// (docs/degraded-mode.md). A policy whose DedupMaxReplays is 0 is never
// retried: its program would charge the retry again. A retry that gets no
// decision leaves the first call's Indeterminate.
func (p *Provider) evaluateDedup(ctx context.Context, c checked, req ratelimit.Request, pre *send.PreCharge) ratelimit.Outcome {
	ps := c.policy
	run := func(pre *send.PreCharge) ratelimit.Outcome {
		res := p.exec.Run(ctx, send.Call{
			Script: ps.dedup, Key: c.key, DedupKey: c.dedupKey,
			Argv: ps.dedupArgv, Cost: req.Cost, CostArg: programs.ArgCost,
			EvalID: string(req.EvaluationID), EvalIDArg: ps.dedupIDArg,
			SendBy: c.sendBy, Pre: pre,
		})
		return p.outcome(ps, res, req.Cost)
	}
	out := run(pre) // the charge, if any, goes with the first call only
	ind, ok := out.(ratelimit.Indeterminate)
	if !ok || (ind.Category != ratelimit.CategoryTimeout && ind.Category != ratelimit.CategoryConnectionLost) ||
		p.acks > 0 || ps.policy.DedupMaxReplays() == 0 || ctx.Err() != nil || p.now().After(c.sendBy) {
		return out
	}
	retried := run(nil)
	switch retried.(type) {
	case ratelimit.Evaluated, ratelimit.Incompatible:
		p.dedupRetries.decided.Add(1)
		return retried
	default: // Unavailable, Indeterminate (outcome returns nothing else)
		// The first call may have run: its Indeterminate stands. What the
		// retry got is counted by kind and category (DedupRetryFailures),
		// the evidence an operator needs to tell why.
		p.dedupRetries.failed.Add(1)
		p.countRetryFailure(DedupRetryFailure{Kind: retried.Kind(), Category: ratelimit.CategoryOf(retried)})
		return out
	}
}

// DedupRetryFailure names what a failed dedup retry got: the outcome's
// kind (unavailable or indeterminate) and its category.
type DedupRetryFailure struct {
	Kind     ratelimit.OutcomeKind
	Category ratelimit.Category
}

func (p *Provider) countRetryFailure(f DedupRetryFailure) {
	p.dedupRetries.mu.Lock()
	defer p.dedupRetries.mu.Unlock()
	if p.dedupRetries.failedBy == nil {
		p.dedupRetries.failedBy = make(map[DedupRetryFailure]uint64)
	}
	p.dedupRetries.failedBy[f]++
}

// DedupRetryFailures returns the failed retries counted by DedupRetries,
// by what each retry got, since New (a copy; empty when none failed).
func (p *Provider) DedupRetryFailures() map[DedupRetryFailure]uint64 {
	p.dedupRetries.mu.Lock()
	defer p.dedupRetries.mu.Unlock()
	out := make(map[DedupRetryFailure]uint64, len(p.dedupRetries.failedBy))
	for k, v := range p.dedupRetries.failedBy {
		out[k] = v
	}
	return out
}

// DedupRetries returns how many Indeterminate calls with an evaluation ID
// were retried with the same ID and got a decision (decided) or did not
// (failed), since New.
func (p *Provider) DedupRetries() (decided, failed uint64) {
	return p.dedupRetries.decided.Load(), p.dedupRetries.failed.Load()
}
