package programs

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// serverMillis reads the server clock in ms.
func serverMillis(t *testing.T, ctx context.Context, c redis.Cmdable) int64 {
	t.Helper()
	tm, err := c.Time(ctx).Result()
	require.NoError(t, err)
	return tm.UnixMilli()
}

// pushLastObserved returns st with lastObservedMillis set ahead of now by
// ahead ms (never behind its current value), the window id kept consistent.
func pushLastObserved(n numbers, st State, now, ahead int64) State {
	f, err := st.Decode()
	if err != nil {
		panic(err)
	}
	out := maps.Clone(f)
	l := max(f[FieldLastObserved], now+ahead)
	out[FieldLastObserved] = l
	if n.alg == ratelimit.AlgorithmFixedWindow || n.alg == ratelimit.AlgorithmSlidingWindowCounter {
		w := f[FieldWindow]
		if nw := l / n.win; nw != w {
			out[FieldWindow] = nw
			if n.alg == ratelimit.AlgorithmSlidingWindowCounter {
				var prev int64
				if nw == w+1 {
					prev = f[FieldCount]
				}
				out[FieldPrevious] = prev
			}
		}
	}
	return reencode(st, out)
}

// TestRedisExactBoundaryAfterDenial: on the real server, a denied request
// consumes nothing, so the exact remaining amount is admitted right after it
// and one unit more is not. Long windows and a slow refill keep the three
// calls in one window; a run that straddles a boundary is repeated (at most
// three times).
func TestRedisExactBoundaryAfterDenial(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client()
	ctx := redisCtx(t)
	policies := map[ratelimit.Algorithm]ratelimit.Policy{
		ratelimit.AlgorithmFixedWindow:          mustPolicy(t, ratelimit.AlgorithmFixedWindow, ratelimit.FixedWindow{Limit: 5, Window: time.Minute}, 5, time.Second, time.Second),
		ratelimit.AlgorithmSlidingWindowCounter: mustPolicy(t, ratelimit.AlgorithmSlidingWindowCounter, ratelimit.SlidingWindowCounter{Limit: 5, Window: time.Hour}, 5, time.Second, time.Second),
		ratelimit.AlgorithmTokenBucket:          mustPolicy(t, ratelimit.AlgorithmTokenBucket, ratelimit.TokenBucket{Capacity: 5, RefillTokens: 1, RefillPeriod: time.Hour}, 5, time.Second, time.Second),
		ratelimit.AlgorithmGCRA:                 mustPolicy(t, ratelimit.AlgorithmGCRA, ratelimit.GCRA{Rate: 1, Period: time.Hour, Burst: 5}, 5, time.Second, time.Second),
		ratelimit.AlgorithmSlidingLog:           mustPolicy(t, ratelimit.AlgorithmSlidingLog, ratelimit.SlidingLog{Limit: 5, Window: time.Hour}, 5, time.Second, time.Second),
		ratelimit.AlgorithmLeakyBucket:          mustPolicy(t, ratelimit.AlgorithmLeakyBucket, ratelimit.LeakyBucket{Rate: 1, Period: time.Hour, QueueSize: 4, DelayAfter: 4}, 5, time.Second, time.Second),
		ratelimit.AlgorithmConcurrency:          mustPolicy(t, ratelimit.AlgorithmConcurrency, ratelimit.Concurrency{Limit: 5, MaxHold: time.Hour}, 5, time.Second, time.Second),
	}
	for _, a := range algorithms {
		t.Run(a.String(), func(t *testing.T) {
			p, prog := policies[a], mustProgram(t, a)
			for attempt := 0; ; attempt++ {
				require.Less(t, attempt, 3, "three runs straddled a window boundary")
				key := fmt.Sprintf("boundary:%v:%d", a, attempt)
				eval := func(cost int64) Reply {
					v, err := runRedis(ctx, c, prog, key, Args(p, cost)...)
					require.NoError(t, err)
					r := toReply(t, v)
					require.NoError(t, r.Check(p))
					return r
				}
				first := eval(4)
				require.Equal(t, StatusAllowed, first.Status)
				before := snap(t, ctx, c, key)
				denied := eval(2)
				after := snap(t, ctx, c, key)
				exact := eval(1)
				over := eval(1)
				if w := numbersOf(p).win; w > 0 && first.EffectiveNowMillis/w != over.EffectiveNowMillis/w {
					continue // straddled a window boundary
				}
				require.Equal(t, StatusDenied, denied.Status)
				require.Equal(t, int64(1), denied.Remaining)
				require.Equal(t, before, after, "the denial wrote nothing")
				require.Equal(t, StatusAllowed, exact.Status, "the exact remainder is admitted after the denial")
				require.Equal(t, int64(0), exact.Remaining)
				require.Equal(t, StatusDenied, over.Status, "one more unit is not")
				return
			}
		})
	}
}

// TestRedisRetryAfterIsHonored: after a denial, waiting retryAfter on the
// server's clock admits the same request (fixed and sliding windows of
// 150 ms, a bucket refilling one token per 120 ms, GCRA at 1 per 120 ms).
func TestRedisRetryAfterIsHonored(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client()
	ctx := redisCtx(t)
	ms := func(n int64) time.Duration { return time.Duration(n) * time.Millisecond }
	for _, p := range []ratelimit.Policy{
		mustPolicy(t, ratelimit.AlgorithmFixedWindow, ratelimit.FixedWindow{Limit: 2, Window: ms(150)}, 2, time.Second, 0),
		mustPolicy(t, ratelimit.AlgorithmSlidingWindowCounter, ratelimit.SlidingWindowCounter{Limit: 2, Window: ms(150)}, 2, time.Second, 0),
		mustPolicy(t, ratelimit.AlgorithmTokenBucket, ratelimit.TokenBucket{Capacity: 2, RefillTokens: 1, RefillPeriod: ms(120)}, 2, time.Second, 0),
		mustPolicy(t, ratelimit.AlgorithmGCRA, ratelimit.GCRA{Rate: 1, Period: ms(120), Burst: 2}, 2, time.Second, 0),
	} {
		t.Run(p.Algorithm().String(), func(t *testing.T) {
			prog := mustProgram(t, p.Algorithm())
			key := "retry:" + p.Algorithm().String()
			var denied Reply
			for i := 0; i < 5 && denied.Status != StatusDenied; i++ {
				v, err := runRedis(ctx, c, prog, key, Args(p, 2)...)
				require.NoError(t, err)
				denied = toReply(t, v)
			}
			require.Equal(t, StatusDenied, denied.Status)
			require.LessOrEqual(t, denied.RetryAfterMillis, int64(300))
			for serverMillis(t, ctx, c) < denied.EffectiveNowMillis+denied.RetryAfterMillis {
				time.Sleep(time.Millisecond)
			}
			v, err := runRedis(ctx, c, prog, key, Args(p, 2)...)
			require.NoError(t, err)
			require.Equal(t, StatusAllowed, toReply(t, v).Status, "after retryAfter (%+v)", denied)
		})
	}
}

// seedState writes st at key with a long TTL, replacing what was there.
func seedState(t *testing.T, ctx context.Context, c redis.Cmdable, key string, st State) {
	t.Helper()
	require.NoError(t, c.Del(ctx, key).Err())
	require.NoError(t, c.Set(ctx, key, []byte(st), time.Hour).Err())
}

// TestRedisClockRegressionLeavesStateIdentical: lastObservedMillis set ahead
// of the server clock (what a clock that went back looks like) by more than
// MaxClockRegression answers CLOCK_UNSAFE and leaves the hash and its expiry
// byte for byte as they were (DUMP, PEXPIRETIME); within the tolerance the
// request is evaluated at lastObservedMillis.
func TestRedisClockRegressionLeavesStateIdentical(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client()
	ctx := redisCtx(t)
	for _, a := range algorithms {
		t.Run(a.String(), func(t *testing.T) {
			p, prog := smallPolicy(t, a, time.Second), mustProgram(t, a)
			n := numbersOf(p)
			key := "clock:" + a.String()
			v, err := runRedis(ctx, c, prog, key, Args(p, 1)...)
			require.NoError(t, err)
			first := toReply(t, v)
			require.Equal(t, StatusAllowed, first.Status)
			st := getState(t, c, key)

			far := pushLastObserved(n, st, first.ServerNowMillis, 60_000)
			seedState(t, ctx, c, key, far)
			before := snap(t, ctx, c, key)
			v, err = runRedis(ctx, c, prog, key, Args(p, 1)...)
			require.NoError(t, err)
			r := toReply(t, v)
			require.Equal(t, StatusClockUnsafe, r.Status)
			require.NoError(t, r.Check(p))
			last := stateField(t, far, FieldLastObserved)
			require.Equal(t, last, r.EffectiveNowMillis)
			require.Equal(t, last-r.ServerNowMillis-n.reg, r.RetryAfterMillis)
			require.Equal(t, before, snap(t, ctx, c, key), "CLOCK_UNSAFE changed nothing")

			near := pushLastObserved(n, st, first.ServerNowMillis, 600)
			seedState(t, ctx, c, key, near)
			v, err = runRedis(ctx, c, prog, key, Args(p, 1)...)
			require.NoError(t, err)
			r = toReply(t, v)
			require.Equal(t, StatusAllowed, r.Status)
			nearLast := stateField(t, near, FieldLastObserved)
			require.Equal(t, nearLast, r.EffectiveNowMillis, "clamped to lastObserved")
			want, next := Evaluate(p, near, r.ServerNowMillis, 1)
			require.Equal(t, want, r)
			require.Equal(t, next, getState(t, c, key))
			require.Equal(t, nearLast, stateField(t, next, FieldLastObserved), "time is never written backwards")
		})
	}
}

// TestRedisBoundaryArithmetic: the edge policies of
// TestBoundaryArithmeticStaysExact on real Redis Lua (doubles) at the
// server's clock, from adversarial states: replies and states equal the
// model's exact integers, and the TTLs (up to about twice MaxHorizonMillis,
// beyond what miniredis can hold) are set exactly and finite.
func TestRedisBoundaryArithmetic(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client()
	ctx := redisCtx(t)
	i := 0
	for name, p := range extremePolicies(t) {
		t.Run(name, func(t *testing.T) {
			prog := mustProgram(t, p.Algorithm())
			rng := rand.New(rand.NewPCG(uint64(len(name)), 1))
			now := serverMillis(t, ctx, c)
			for _, st := range adversarialStates(p, now-5) {
				i++
				key := fmt.Sprintf("edge:%d", i)
				if len(st) > 0 {
					seedState(t, ctx, c, key, st)
				}
				for step := 0; step < 6; step++ {
					cost := []int64{1, p.MaxCost(), 1 + rng.Int64N(p.MaxCost())}[rng.IntN(3)]
					before := snap(t, ctx, c, key)
					if p.Algorithm() == ratelimit.AlgorithmGCRA {
						// GCRA reads microseconds, which the reply does
						// not carry: match within a TIME bracket.
						require.NoError(t, c.ScriptLoad(ctx, prog.Source).Err())
						res := gcraTx(t, ctx, c, prog, 1, key, Args(p, cost)...)
						got, after := res.replies[0], res.after
						require.NoError(t, got.Check(p))
						_, next, ok := matchMicros(p, st, res.from, res.to, cost, got, res.states[0])
						require.True(t, ok, "cost %d state %v: no µs in [%d, %d] gives %+v", cost, st, res.from, res.to, got)
						st = next
						if got.Status != StatusAllowed {
							require.Equal(t, before, after)
							continue
						}
						requireExpiryAt(t, after.expireAt, p, got)
						if got.ExpiryMillis(p) < 60_000 {
							seedState(t, ctx, c, key, st)
						}
						continue
					}
					got, stored, after := evalTx(t, ctx, c, prog, false, key, Args(p, cost)...)
					require.NoError(t, got.Check(p))
					want, next := Evaluate(p, st, got.ServerNowMillis, cost)
					require.Equal(t, want, got, "cost %d state %v", cost, st)
					st = next
					require.Equal(t, st, stored)
					if got.Status != StatusAllowed {
						require.Equal(t, before, after)
						continue
					}
					requireExpiryAt(t, after.expireAt, p, got)
					if got.ExpiryMillis(p) < 60_000 {
						// Keep following the same state past its short TTL.
						seedState(t, ctx, c, key, st)
					}
				}
			}
		})
	}
}

// TestRedisTokenRefillRemainderCarry: on the real server (its own clock),
// many small allowed steps refill exactly what one big step would. The
// bucket is emptied at l0, then cost-1 calls arrive every 0-3 ms, each
// refilling 3 tokens per 7 ms, a fraction of a token per step; the bucket
// never nears its capacity, so with the sub-token remainder carried the
// stored scaled level is exactly (lEnd - l0) * R - admitted * P. A program
// that dropped the remainder, or reset the refill instant on each call,
// would store less.
func TestRedisTokenRefillRemainderCarry(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client()
	ctx := redisCtx(t)
	const capacity, rate, period = 100_000, 3, 7
	p := mustPolicy(t, ratelimit.AlgorithmTokenBucket,
		ratelimit.TokenBucket{Capacity: capacity, RefillTokens: rate, RefillPeriod: period * time.Millisecond},
		capacity, time.Minute, time.Second)
	prog := mustProgram(t, ratelimit.AlgorithmTokenBucket)
	key := "carry"
	first, st, _ := evalTx(t, ctx, c, prog, false, key, Args(p, capacity)...)
	require.Equal(t, StatusAllowed, first.Status)
	require.Equal(t, int64(0), stateField(t, st, FieldTokens))
	require.Equal(t, int64(0), stateField(t, st, FieldRemainder))
	l0 := first.EffectiveNowMillis

	rng := rand.New(rand.NewPCG(7, 3))
	var admitted, fractional int64
	for i := 0; i < 150; i++ {
		time.Sleep(time.Duration(rng.Int64N(4)) * time.Millisecond)
		r, st2, _ := evalTx(t, ctx, c, prog, false, key, Args(p, 1)...)
		require.NoError(t, r.Check(p))
		if r.Status == StatusAllowed {
			admitted++
			if stateField(t, st2, FieldRemainder) != 0 {
				fractional++
			}
		}
		st = st2
	}
	require.Positive(t, admitted)
	require.Positive(t, fractional, "some writes stored a sub-token remainder")
	field := func(name string) int64 { return stateField(t, st, name) }
	lEnd, tokens, rem := field(FieldLastObserved), field(FieldTokens), field(FieldRemainder)
	require.Less(t, (lEnd-l0)*rate, int64(capacity*period), "never near capacity: no saturation")
	require.Equal(t, (lEnd-l0)*rate-admitted*period, tokens*period+rem,
		"scaled level after %d admits over %d ms: one big step", admitted, lEnd-l0)
	t.Logf("%d admits over %d ms; stored %d tokens + %d/%d", admitted, lEnd-l0, tokens, rem, period)
}
