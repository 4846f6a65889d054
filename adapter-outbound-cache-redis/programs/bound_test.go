package programs

import (
	"strconv"
	"strings"
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

// TestBindRefusesWhatItCannotBind: the zero policy, and a program source
// without exactly one argument block of the shape Bind replaces, are
// errors wrapping ErrBind, never a program.
func TestBindRefusesWhatItCannotBind(t *testing.T) {
	_, err := Bind(ratelimit.Policy{})
	require.ErrorIs(t, err, ErrBind)

	p := smallPolicy(t, ratelimit.AlgorithmTokenBucket, time.Second)
	prog := mustProgram(t, ratelimit.AlgorithmTokenBucket)
	block := boundBlock.FindString(prog.Source)
	require.NotEmpty(t, block)
	for name, src := range map[string]string{
		"no block":         strings.Replace(prog.Source, block, "", 1),
		"two blocks":       strings.Replace(prog.Source, block, block+block, 1),
		"another count":    strings.Replace(prog.Source, "#ARGV ~= 7", "#ARGV ~= 8", 1),
		"no #!lua line":    strings.TrimPrefix(prog.Source, "#!lua\n"),
		"an unread ARGV":   strings.Replace(prog.Source, block, block+"local x = int(ARGV[9])\n", 1),
		"a raw ARGV after": strings.Replace(prog.Source, block, block+"local x = ARGV[5]\n", 1),
		"a parameter more": strings.Replace(prog.Source, "int(ARGV[3]), ARGV[4], ARGV[5], ARGV[6], ARGV[7]", "int(ARGV[3]), ARGV[4], ARGV[5], ARGV[6], ARGV[7], ARGV[8]", 1),
	} {
		bad := prog
		bad.Source = src
		_, err := bindSource(bad, Args(p, 1))
		require.Error(t, err, name)
	}
	_, err = bindSource(prog, append(Args(p, 1)[:4], int64(-1), int64(1), int64(1)))
	require.Error(t, err, "a negative parameter")
	_, err = bindSource(prog, append(Args(p, 1)[:4], "5", int64(1), int64(1)))
	require.Error(t, err, "a parameter that is not an int64")
}
