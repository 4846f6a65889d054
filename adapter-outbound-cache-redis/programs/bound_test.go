package programs

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// TestBoundProgramsReproduceVectors runs every golden case through its
// policy's bound program (Bind) on miniredis, exactly as
// TestProgramsReproduceVectors runs the embedded one: every reply field,
// the stored value and the TTL must be the model's.
func TestBoundProgramsReproduceVectors(t *testing.T) {
	vf := loadVectors(t)
	for n, vc := range vf.Cases {
		t.Run(vc.Name, func(t *testing.T) {
			t.Parallel()
			m := newMini(t)
			p := vc.policy(t)
			prog, err := Bind(p)
			require.NoError(t, err)
			require.Equal(t, ArgCountBound, prog.ArgCount)
			key := fmt.Sprintf("vector:%d", n)
			var st State
			for i, step := range vc.Steps {
				where := fmt.Sprintf("step %d at %d cost %d", i, step.ServerNowMillis, step.Cost)
				v, err := m.run(prog, step.ServerNowMillis, key, BoundArgs(p, step.Cost)...)
				require.NoError(t, err, where)
				got := toReply(t, v)
				checkStep(t, where, step, got)
				want, next := Evaluate(p, st, step.ServerNowMillis, step.Cost)
				require.Equal(t, want, got, "%s: program and model", where)
				st = next
				require.Equal(t, st, getState(t, m.c, key), "%s: stored value", where)
				if got.Status == StatusAllowed {
					require.Equal(t, got.ExpiryMillis(p), m.srv.TTL(key).Milliseconds(), "%s: TTL", where)
				}
			}
		})
	}
}

func mustBind(t testing.TB, p ratelimit.Policy) Program {
	t.Helper()
	b, err := Bind(p)
	require.NoError(t, err)
	return b
}

// boundInvalidArgs are ARGV a bound program of p must answer StatusInvalid
// to: every malformed revision or cost invalidArgs tries, another
// revision, a cost above the limit, the wrong count, and the embedded
// program's own ARGV.
func boundInvalidArgs(p ratelimit.Policy) map[string][]any {
	valid := BoundArgs(p, 1)
	with := func(i int, v any) []any {
		a := append([]any(nil), valid...)
		a[i] = v
		return a
	}
	out := map[string][]any{
		"no args":                 {},
		"revision only":           valid[:1],
		"one too many":            append(append([]any(nil), valid...), 1),
		"the embedded ARGV":       Args(p, 1),
		"another revision":        with(ArgRevision, p.Revision()+1),
		"revision 0":              with(ArgRevision, 0),
		"cost 0":                  with(ArgCost, 0),
		"cost above the limit":    with(ArgCost, p.Limit()+1),
		"cost > M":                with(ArgCost, "9007199254740992"),
		"revision with a leading": with(ArgRevision, "0"+strconv.FormatInt(p.Revision(), 10)),
	}
	for _, bad := range []string{"", "-1", "+1", "01", "1.0", "1e3", " 1", "1 ", "0x10", "abc", "12345678901234567", "inf", "nan",
		"99999999999999999999", "1\x00", "\x001"} {
		for i := range valid {
			out["arg "+strconv.Itoa(i)+" "+strconv.Quote(bad)] = with(i, bad)
		}
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
			for name, args := range bad {
				for _, key := range []string{fresh, existing} {
					v, err := runRedis(ctx, c, bound, key, args...)
					require.NoError(t, err, name)
					r := toReply(t, v)
					require.Equal(t, Reply{Status: StatusInvalid, ServerNowMillis: r.ServerNowMillis}, r, name)
					require.Positive(t, r.ServerNowMillis)
				}
				n, err := c.Exists(ctx, fresh).Result()
				require.NoError(t, err)
				require.Zero(t, n, "%s: no key created", name)
				require.Equal(t, before, snap(t, ctx, c, existing), "%s: state untouched", name)
			}
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
