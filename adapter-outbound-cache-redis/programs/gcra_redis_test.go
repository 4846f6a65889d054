package programs

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// gcraTxResult is what one MULTI/EXEC of gcraTx observed.
type gcraTxResult struct {
	from, to int64   // server TIME in µs before the first and after the last call
	replies  []Reply // one per call
	states   []State // the key's value right after each call
	after    snapshot
}

// gcraTx runs the program n times in one MULTI/EXEC, bracketed by TIME
// before and after and with a GET after each call, so that each call's
// microsecond instant lies in [from, to] and each call's write is seen.
func gcraTx(t *testing.T, ctx context.Context, c *redis.Client, prog Program, n int, key string, args ...any) gcraTxResult {
	t.Helper()
	evs := make([]*redis.Cmd, n)
	gets := make([]*redis.StringCmd, n)
	var t1, t2 *redis.TimeCmd
	var dump *redis.StringCmd
	var at *redis.Cmd
	_, err := c.TxPipelined(ctx, func(tx redis.Pipeliner) error {
		t1 = tx.Time(ctx)
		for i := range evs {
			evs[i] = tx.EvalSha(ctx, prog.SHA1, []string{key}, args...)
			gets[i] = tx.Get(ctx, key)
		}
		t2 = tx.Time(ctx)
		dump = tx.Dump(ctx, key)
		at = tx.Do(ctx, "PEXPIRETIME", key)
		return nil
	})
	if err != nil && err != redis.Nil {
		require.NoError(t, err)
	}
	var out gcraTxResult
	out.from, out.to = t1.Val().UnixMicro(), t2.Val().UnixMicro()
	for i := range evs {
		res, err := evs[i].Int64Slice()
		require.NoError(t, err)
		out.replies = append(out.replies, toReply(t, res))
		var st State
		if v, err := gets[i].Result(); err != redis.Nil {
			require.NoError(t, err)
			st = State(v)
		}
		out.states = append(out.states, st)
	}
	d, err := dump.Result()
	if err != redis.Nil {
		require.NoError(t, err)
	}
	exp, err := at.Int64()
	require.NoError(t, err)
	out.after = snapshot{d, exp}
	return out
}

// matchMicros finds the microsecond in [lo, hi], within the reply's
// millisecond, at which the model gives exactly got and leaves exactly
// stored; ok is false when there is none. The search is bounded by the
// 1,000 µs of one millisecond.
func matchMicros(p ratelimit.Policy, st State, lo, hi, cost int64, got Reply, stored State) (us int64, next State, ok bool) {
	from, to := max(lo, got.ServerNowMillis*1000), min(hi, got.ServerNowMillis*1000+999)
	for u := from; u <= to; u++ {
		r, nx := EvaluateMicros(p, st, u, cost)
		if r == got && string(nx) == string(stored) && (nx == nil) == (stored == nil) {
			return u, nx, true
		}
	}
	return 0, nil, false
}

// TestRedisGCRAMatchesModel is GCRA's Lua/model differential on a real
// server (ADR 0021): seeded random sleeps, costs, bursts of three calls in
// one MULTI/EXEC, and lastObservedMillis pushed ahead of the server clock
// (within and beyond the tolerance). The server's TIME in microseconds is
// not in the reply, so each transaction is bracketed by TIME: every reply
// and stored value must be the model's at some microsecond within the
// bracket and the reply's millisecond (the search is exhaustive over at
// most 1,000 µs), calls in one transaction in order; every admission sets
// the model's TTL and nothing else writes.
func TestRedisGCRAMatchesModel(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client()
	ms := func(n int64) time.Duration { return time.Duration(n) * time.Millisecond }
	g := func(rate, periodMs, burst, maxCost, regMs int64) ratelimit.Policy {
		return mustPolicy(t, ratelimit.AlgorithmGCRA, ratelimit.GCRA{Rate: rate, Period: ms(periodMs), Burst: burst}, maxCost, ms(500), ms(regMs))
	}
	policies := map[string]ratelimit.Policy{
		"gcra 3 per 20ms, burst 5":  g(3, 20, 5, 5, 1000),
		"gcra 7 per 3ms, burst 2":   g(7, 3, 2, 2, 0),
		"gcra 1000/s, burst 10":     g(1000, 1000, 10, 4, 5),
		"gcra 2 per 1ms, burst 3":   g(2, 1, 3, 3, 5),
		"gcra 1 per 50ms, burst 1":  g(1, 50, 1, 1, 20),
		"gcra 100/s, burst 20 (rr)": g(100, 1000, 20, 20, 0),
	}
	for name, p := range policies {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := redisCtx(t)
			prog := mustProgram(t, ratelimit.AlgorithmGCRA)
			sha, err := c.ScriptLoad(ctx, prog.Source).Result()
			require.NoError(t, err)
			require.Equal(t, prog.SHA1, sha)
			rng := rand.New(rand.NewPCG(22, uint64(len(name))))
			key := "gdiff:" + name
			n := numbersOf(p)
			var st State
			statuses := map[Status]int{}
			for step := 0; step < 60; step++ {
				time.Sleep(time.Duration(rng.Int64N(12)) * time.Millisecond)
				var restore State
				if rng.IntN(8) == 0 && len(st) > 0 {
					ahead := rng.Int64N(min(n.reg, 30) + 1)
					if rng.IntN(2) == 0 {
						ahead = n.reg + 1 + rng.Int64N(30)
					}
					restore = st
					st = pushLastObserved(n, st, serverMillis(t, ctx, c), ahead)
					seedState(t, ctx, c, key, st)
				}
				calls, cost := 1, 1+rng.Int64N(p.MaxCost())
				if step%10 == 9 && restore == nil {
					calls, cost = burstCalls, p.MaxCost()
				}
				before := snap(t, ctx, c, key)
				res := gcraTx(t, ctx, c, prog, calls, key, Args(p, cost)...)
				lo := res.from
				var lastAllowed *Reply
				for i, got := range res.replies {
					require.NoError(t, got.Check(p), "step %d call %d: %+v", step, i, got)
					us, next, ok := matchMicros(p, st, lo, res.to, cost, got, res.states[i])
					require.True(t, ok, "step %d call %d cost %d: no µs in [%d, %d] gives reply %+v and state %x from state %x",
						step, i, cost, lo, res.to, got, res.states[i], st)
					lo, st = us, next
					statuses[got.Status]++
					if got.Status == StatusAllowed {
						lastAllowed = &res.replies[i]
					}
				}
				if lastAllowed != nil {
					requireExpiryAt(t, res.after.expireAt, p, *lastAllowed)
				} else {
					require.Equal(t, before, res.after, "step %d: no admission, nothing written", step)
					if restore != nil {
						st = restore
						seedState(t, ctx, c, key, st)
					}
				}
			}
			require.Positive(t, statuses[StatusAllowed], "%v", statuses)
			require.Positive(t, statuses[StatusDenied], "%v", statuses)
			t.Logf("%s: statuses %v", name, fmt.Sprint(statuses))
		})
	}
}
