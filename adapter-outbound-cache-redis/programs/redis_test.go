package programs

// The Redis service lane: the programs on a real redis-server (package
// redistest; skipped under -short, required by `make test`). Time here is the
// server's own clock, so the model is fed the serverNowMillis each reply
// reports; controlled-clock runs are in the miniredis tests.

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

func redisCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// runRedis sends the exact embedded source (shebang included) with EVAL.
func runRedis(ctx context.Context, c redis.Cmdable, prog Program, key string, args ...any) ([]int64, error) {
	return evalInts(ctx, c, prog.Source, []string{key}, args...)
}

// snapshot is everything an evaluation could change on a key: its
// serialized value and its absolute expiry (-1 none, -2 no key).
type snapshot struct {
	dump     string
	expireAt int64
}

func snap(t *testing.T, ctx context.Context, c *redis.Client, key string) snapshot {
	t.Helper()
	d, err := c.Dump(ctx, key).Result()
	if err == redis.Nil {
		d = ""
	} else {
		require.NoError(t, err)
	}
	at, err := c.Do(ctx, "PEXPIRETIME", key).Int64()
	require.NoError(t, err)
	return snapshot{d, at}
}

// evalTx runs the program once; see evalTxN.
func evalTx(t *testing.T, ctx context.Context, c *redis.Client, prog Program, sha bool, key string, args ...any) (Reply, State, snapshot) {
	t.Helper()
	replies, st, after := evalTxN(t, ctx, c, prog, sha, 1, key, args...)
	return replies[0], st, after
}

// evalTxN runs the program n times (EVALSHA of sha, or EVAL of src when sha
// is false) and reads the key back, all in one MULTI/EXEC, so that what is
// compared is exactly what the program left, even when its TTL is a few ms,
// and so that n > 1 calls reach the server back to back, microseconds apart
// (nothing else runs in between, however slow the network is).
func evalTxN(t *testing.T, ctx context.Context, c *redis.Client, prog Program, sha bool, n int, key string, args ...any) ([]Reply, State, snapshot) {
	t.Helper()
	evs := make([]*redis.Cmd, n)
	var hg *redis.StringCmd
	var dump *redis.StringCmd
	var at *redis.Cmd
	_, err := c.TxPipelined(ctx, func(tx redis.Pipeliner) error {
		for i := range evs {
			if sha {
				evs[i] = tx.EvalSha(ctx, prog.SHA1, []string{key}, args...)
			} else {
				evs[i] = tx.Eval(ctx, prog.Source, []string{key}, args...)
			}
		}
		hg = tx.Get(ctx, key)
		dump = tx.Dump(ctx, key)
		at = tx.Do(ctx, "PEXPIRETIME", key)
		return nil
	})
	if err != nil && err != redis.Nil {
		require.NoError(t, err)
	}
	replies := make([]Reply, n)
	for i, ev := range evs {
		res, err := ev.Int64Slice()
		require.NoError(t, err)
		replies[i] = toReply(t, res)
	}
	d, err := dump.Result()
	if err != redis.Nil {
		require.NoError(t, err)
	}
	exp, err := at.Int64()
	require.NoError(t, err)
	var st State
	if v, err := hg.Result(); err != redis.Nil {
		require.NoError(t, err)
		st = State(v)
	}
	return replies, st, snapshot{d, exp}
}

// requireExpiryAt checks the TTL an allowed reply must have set: finite, and
// PEXPIRETIME = server time of the write + (resetAt - serverNow) + grace,
// allowing for the server's clock advancing between TIME and PEXPIRE.
func requireExpiryAt(t *testing.T, at int64, p ratelimit.Policy, r Reply) {
	t.Helper()
	require.NotEqual(t, int64(-1), at, "a written state always has a TTL")
	want := r.ServerNowMillis + r.ExpiryMillis(p)
	require.GreaterOrEqual(t, at, want, "expiry at %d, want %d", at, want)
	require.LessOrEqual(t, at-want, int64(1000), "expiry at %d, want %d", at, want)
}

// differentialPolicies are short-window policies, so random sleeps cross
// windows and refill periods within a bounded test time.
func differentialPolicies(t *testing.T) map[string]ratelimit.Policy {
	ms := func(n int64) time.Duration { return time.Duration(n) * time.Millisecond }
	fw, sw, tb := ratelimit.AlgorithmFixedWindow, ratelimit.AlgorithmSlidingWindowCounter, ratelimit.AlgorithmTokenBucket
	sl := ratelimit.AlgorithmSlidingLog
	return map[string]ratelimit.Policy{
		"fixed 5/40ms":           mustPolicy(t, fw, ratelimit.FixedWindow{Limit: 5, Window: ms(40)}, 5, ms(500), ms(1000)),
		"fixed 3/7ms":            mustPolicy(t, fw, ratelimit.FixedWindow{Limit: 3, Window: ms(7)}, 2, ms(500), 0),
		"sliding 6/60ms":         mustPolicy(t, sw, ratelimit.SlidingWindowCounter{Limit: 6, Window: ms(60)}, 6, ms(500), ms(1000)),
		"sliding 4/9ms":          mustPolicy(t, sw, ratelimit.SlidingWindowCounter{Limit: 4, Window: ms(9)}, 3, ms(500), ms(20)),
		"token 5, 1 per 20ms":    mustPolicy(t, tb, ratelimit.TokenBucket{Capacity: 5, RefillTokens: 1, RefillPeriod: ms(20)}, 5, ms(500), ms(1000)),
		"token 7, 3 per 101ms":   mustPolicy(t, tb, ratelimit.TokenBucket{Capacity: 7, RefillTokens: 3, RefillPeriod: ms(101)}, 7, ms(500), 0),
		"token 1000, 7 per 13ms": mustPolicy(t, tb, ratelimit.TokenBucket{Capacity: 1000, RefillTokens: 7, RefillPeriod: ms(13)}, 400, ms(500), ms(5)),
		"log 5/40ms":             mustPolicy(t, sl, ratelimit.SlidingLog{Limit: 5, Window: ms(40)}, 5, ms(500), ms(1000)),
		"log 4/9ms":              mustPolicy(t, sl, ratelimit.SlidingLog{Limit: 4, Window: ms(9)}, 3, ms(500), ms(20)),
		"log 20/70ms":            mustPolicy(t, sl, ratelimit.SlidingLog{Limit: 20, Window: ms(70)}, 7, ms(500), 0),
		"concurrency 4/30ms":     mustPolicy(t, ratelimit.AlgorithmConcurrency, ratelimit.Concurrency{Limit: 4, MaxHold: ms(30)}, 2, ms(500), ms(20)),
	}
}

// burstCalls is how many MaxCost calls a burst step of
// TestRedisProgramsMatchModel sends back to back: more than any
// differential policy admits in one window.
const burstCalls = 3

// TestRedisProgramsMatchModel is the differential test: each program, via
// EVALSHA of the manifest SHA1 (every other single call its policy's bound
// program, ADR 0030), on seeded random sequences
// of sleeps and costs, sometimes with lastObservedMillis pushed ahead of the
// server clock (a clock regression, within and beyond the tolerance), must
// answer exactly what the model answers for the serverNowMillis it reports,
// store exactly the model's state, and set the model's TTL on every write.
func TestRedisProgramsMatchModel(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client()
	seed := uint64(20260728)
	for name, p := range differentialPolicies(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := redisCtx(t)
			prog := mustProgram(t, p.Algorithm())
			sha, err := c.ScriptLoad(ctx, prog.Source).Result()
			require.NoError(t, err)
			require.Equal(t, prog.SHA1, sha, "the manifest SHA1 is what EVALSHA sends")
			// Every other single call is the policy's bound program (ADR
			// 0030) on the same state.
			bound := mustBind(t, p)
			sha, err = c.ScriptLoad(ctx, bound.Source).Result()
			require.NoError(t, err)
			require.Equal(t, bound.SHA1, sha, "Bind's SHA1 is what EVALSHA sends")
			rng := rand.New(rand.NewPCG(seed, uint64(len(name))))
			key := "diff:" + name
			var st State
			statuses := map[Status]int{}
			n := numbersOf(p)
			for step := 0; step < 60; step++ {
				time.Sleep(time.Duration(rng.Int64N(12)) * time.Millisecond)
				var restore State
				if rng.IntN(8) == 0 && len(st) > 0 {
					// Simulate a server clock that went back: the stored
					// instant moves ahead of the server clock, the same on
					// both sides; within the tolerance (clamped) or beyond it
					// (CLOCK_UNSAFE), after which the old state is put back
					// so that the run is not frozen for the whole tolerance.
					ahead := rng.Int64N(min(n.reg, 30) + 1)
					if rng.IntN(2) == 0 {
						ahead = n.reg + 1 + rng.Int64N(30)
					}
					restore = st
					st = pushLastObserved(n, st, serverMillis(t, ctx, c), ahead)
					seedState(t, ctx, c, key, st)
				}
				cost := 1 + rng.Int64N(p.MaxCost())
				if step%10 == 9 && restore == nil {
					// A burst: three calls of MaxCost back to back in one
					// MULTI/EXEC exceed every policy's limit, so denials are
					// exercised however slow the round trip is compared
					// with the short windows (a slow lane otherwise lets
					// every window roll over between calls).
					replies, stored, after := evalTxN(t, ctx, c, prog, true, burstCalls, key, Args(p, p.MaxCost())...)
					var lastAllowed *Reply
					for i, got := range replies {
						require.NoError(t, got.Check(p), "step %d call %d: %+v", step, i, got)
						want, next := Evaluate(p, st, got.ServerNowMillis, p.MaxCost())
						require.Equal(t, want, got, "step %d call %d cost %d state %v", step, i, p.MaxCost(), st)
						statuses[got.Status]++
						st = next
						if got.Status == StatusAllowed {
							lastAllowed = &replies[i]
						}
					}
					require.Equal(t, st, stored, "step %d: stored hash after the burst", step)
					if lastAllowed != nil {
						requireExpiryAt(t, after.expireAt, p, *lastAllowed)
					}
					continue
				}
				before := snap(t, ctx, c, key)
				pr, args := prog, Args(p, cost)
				if step%2 == 1 {
					pr, args = bound, BoundArgs(p, cost)
				}
				got, stored, after := evalTx(t, ctx, c, pr, true, key, args...)
				require.NoError(t, got.Check(p), "step %d: %+v", step, got)
				want, next := Evaluate(p, st, got.ServerNowMillis, cost)
				require.Equal(t, want, got, "step %d cost %d state %v", step, cost, st)
				statuses[got.Status]++
				st = next
				require.Equal(t, st, stored, "step %d: stored hash", step)
				if got.Status == StatusAllowed {
					requireExpiryAt(t, after.expireAt, p, got)
				} else {
					require.Equal(t, before, after, "step %d: %v writes nothing", step, got.Status)
					if restore != nil {
						st = restore
						seedState(t, ctx, c, key, st)
					}
				}
			}
			require.Greater(t, burstCalls*p.MaxCost(), numbersOf(p).limit, "a burst must exceed the limit")
			require.Positive(t, statuses[StatusAllowed], "%v", statuses)
			require.Positive(t, statuses[StatusDenied], "%v", statuses)
			t.Logf("%s: statuses %v", name, statuses)
		})
	}
}
