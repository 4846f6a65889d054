package send

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/programs"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// nopCommander answers every command with nothing.
type nopCommander struct{}

func (nopCommander) Process(context.Context, redis.Cmder) error { return nil }

// TestExecutorReleaseClearsTheCall: a call returned to the pool keeps no
// key, program or argument.
func TestExecutorReleaseClearsTheCall(t *testing.T) {
	x := New(nopCommander{}, time.Now)
	c := x.calls.Get().(*call)
	c.key, c.cost = "secret-key", 3
	c.program.payload, c.program.text = []byte("sha"), "sha"
	c.program.serialized.Store(true)
	c.args[3] = &c.key
	x.release(c)
	assert.Empty(t, c.key, "no key retained in the pool")
	assert.Nil(t, c.program.payload)
	assert.Empty(t, c.program.text)
	assert.False(t, c.program.serialized.Load())
	for _, a := range c.args {
		assert.Nil(t, a)
	}
}

// TestMaxArgsHoldsEveryProgram: the pooled argument storage holds the
// longest program call the programs package lays out, so building one
// never grows it (the allocation budget, make alloc-budget).
func TestMaxArgsHoldsEveryProgram(t *testing.T) {
	longest := 0
	for _, p := range programs.All() {
		longest = max(longest, p.ArgCount)
		for _, of := range []func(ratelimit.Algorithm) (programs.Program, bool){programs.DedupFor, programs.ChargeFor, programs.RefundFor} {
			if q, ok := of(p.Algorithm); ok {
				longest = max(longest, q.ArgCount)
			}
		}
	}
	require.Positive(t, longest)
	assert.LessOrEqual(t, 5+longest, maxArgs)
}

// TestCommandPutsTheCallsValuesWhereTheCallerSays: the cost and the
// evaluation ID go to the ARGV entries the Call names, the shared ARGV is
// never written, and a zero Cost or empty EvalID sends the ARGV as given.
func TestCommandPutsTheCallsValuesWhereTheCallerSays(t *testing.T) {
	x := New(nopCommander{}, time.Now)
	argv := []any{int64(7), int64(1), "x", ""}
	c := x.calls.Get().(*call)
	c.key, c.dedupKey = "k", "d"
	c.cost, c.costArg = 3, 1
	c.evalID, c.evalIDArg = "id-1", 3
	args := x.command(t.Context(), c, CmdEvalSha, []byte("sha"), "sha", argv).Args()
	require.Len(t, args, 5+len(argv))
	assert.Equal(t, 2, args[2], "numkeys: the keys given")
	assert.Equal(t, int64(7), args[5])
	assert.Equal(t, &c.cost, args[6])
	assert.Equal(t, "x", args[7])
	assert.Equal(t, &c.evalID, args[8])
	assert.Equal(t, []any{int64(7), int64(1), "x", ""}, argv, "the shared ARGV is not written")
	x.release(c)

	c = x.calls.Get().(*call)
	c.key = "k"
	args = x.command(t.Context(), c, CmdEvalSha, []byte("sha"), "sha", argv).Args()
	assert.Equal(t, 1, args[2])
	assert.Equal(t, argv, args[4:], "no cost, no ID: the ARGV as given")
	x.release(c)
}
