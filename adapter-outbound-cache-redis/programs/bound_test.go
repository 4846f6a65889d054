package programs

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

func mustBind(t testing.TB, p ratelimit.Policy) Program {
	t.Helper()
	b, err := Bind(p)
	require.NoError(t, err)
	return b
}

// boundInvalidArgs are ARGV a bound program of p must answer StatusInvalid
// to: every malformed ARGV (malformedArgs), another revision, a cost
// above the limit, and the embedded program's own ARGV.
func boundInvalidArgs(p ratelimit.Policy) map[string][]any {
	valid := BoundArgs(p, 1)
	out := malformedArgs(valid)
	for name, args := range map[string][]any{
		"the embedded ARGV":         Args(p, 1),
		"another revision":          withArg(valid, ArgRevision, p.Revision()+1),
		"revision 0":                withArg(valid, ArgRevision, 0),
		"revision with a leading 0": withArg(valid, ArgRevision, "0"+strconv.FormatInt(p.Revision(), 10)),
		"cost 0":                    withArg(valid, ArgCost, 0),
		"cost above the limit":      withArg(valid, ArgCost, p.Limit()+1),
	} {
		out[name] = args
	}
	return out
}

// TestRedisBoundProgramRefusesWhatItWasNotBoundTo: on a real server, a
// bound program answers StatusInvalid, and writes nothing, to every ARGV
// but its revision and a valid cost, as the embedded program does to a
// malformed ARGV (no check is weakened by binding, ADR 0030); the embedded
// program refuses the bound ARGV the same way.
func TestRedisBoundProgramRefusesWhatItWasNotBoundTo(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client()
	ctx := redisCtx(t)
	for _, a := range algorithms {
		t.Run(a.String(), func(t *testing.T) {
			p := smallPolicy(t, a, time.Second)
			bound, prog := mustBind(t, p), mustProgram(t, a)
			fresh, existing := "bound:fresh:"+a.String(), "bound:existing:"+a.String()
			v, err := runRedis(ctx, c, bound, existing, BoundArgs(p, 1)...)
			require.NoError(t, err)
			require.Equal(t, StatusAllowed, toReply(t, v).Status)
			before := snap(t, ctx, c, existing)
			bad := boundInvalidArgs(p)
			requireRefusedUnwritten(t, ctx, c, bound, fresh, existing, bad)
			v, err = runRedis(ctx, c, prog, fresh, BoundArgs(p, 1)...)
			require.NoError(t, err)
			require.Equal(t, int64(StatusInvalid), v[0], "the embedded program given the bound ARGV")
			require.Equal(t, before, snap(t, ctx, c, existing))
			t.Logf("%d invalid ARGV refused", len(bad))
		})
	}
}

// TestBindRefusesWhatItCannotBind: the zero policy is an error wrapping
// ErrBind, never a program; a binding that does not fit the template is
// refused by luasrc.RenderBound (TestRenderBoundRefuses).
func TestBindRefusesWhatItCannotBind(t *testing.T) {
	_, err := Bind(ratelimit.Policy{})
	require.ErrorIs(t, err, ErrBind)
	_, err = ForPolicy(ratelimit.Policy{})
	require.ErrorIs(t, err, ErrBind)
}
