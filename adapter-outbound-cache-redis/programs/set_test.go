package programs

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/programs/luasrc"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit/ratelimittest"
)

// TestSetSourceIsRendered: rate-set-v1.lua is luasrc.RenderSet's output
// byte for byte, its member codes are luasrc.Algorithms' order, and no
// other program changed for it.
func TestSetSourceIsRendered(t *testing.T) {
	f, err := luasrc.RenderSet()
	require.NoError(t, err)
	require.Equal(t, string(f.Source), SetProgram().Source, "rate-set-v1.lua is stale: run go generate")
	members := 0
	for _, m := range models {
		if m.setCode > 0 {
			members++
		}
	}
	require.Equal(t, len(luasrc.Algorithms)-1, members, "every algorithm but the queue")
	var setMembers []luasrc.Algorithm // in code order: every algorithm that does not delay
	for _, alg := range luasrc.Algorithms {
		if !alg.Delays {
			setMembers = append(setMembers, alg)
		}
	}
	for _, a := range algorithms {
		code, ok := SetCode(a)
		if a == ratelimit.AlgorithmLeakyBucket {
			require.False(t, ok, "a queue is never a set member (ADR 0028)")
			require.NotContains(t, SetProgram().Source, "member_leaky_bucket")
			continue
		}
		require.True(t, ok, "%v", a)
		prog := mustProgram(t, a)
		require.Equal(t, "rate-"+setMembers[code-1].Slug+"-v1", prog.Name, "code %d is %v's member function", code, a)
	}
	require.Equal(t, luasrc.SetMaxMembers, SetMaxMembers)
}

// setPolicies are short-window policies of every algorithm (so that a
// trace crosses windows) for the set differential.
func setPolicies(t *testing.T) []ratelimit.Policy {
	ms := func(n int64) time.Duration { return time.Duration(n) * time.Millisecond }
	return []ratelimit.Policy{
		mustPolicy(t, ratelimit.AlgorithmFixedWindow, ratelimit.FixedWindow{Limit: 5, Window: ms(40)}, 3, ms(500), ms(1000)),
		mustPolicy(t, ratelimit.AlgorithmSlidingWindowCounter, ratelimit.SlidingWindowCounter{Limit: 6, Window: ms(60)}, 3, ms(500), 0),
		mustPolicy(t, ratelimit.AlgorithmTokenBucket, ratelimit.TokenBucket{Capacity: 7, RefillTokens: 3, RefillPeriod: ms(101)}, 3, ms(500), 0),
		mustPolicy(t, ratelimit.AlgorithmGCRA, ratelimit.GCRA{Rate: 5, Period: ms(50), Burst: 4}, 3, ms(500), ms(1000)),
		mustPolicy(t, ratelimit.AlgorithmSlidingLog, ratelimit.SlidingLog{Limit: 5, Window: ms(40)}, 3, ms(500), ms(20)),
		mustPolicy(t, ratelimit.AlgorithmConcurrency, ratelimit.Concurrency{Limit: 4, MaxHold: ms(30)}, 3, ms(500), ms(20)),
		mustPolicy(t, ratelimit.AlgorithmFixedWindow, ratelimit.FixedWindow{Limit: 100, Window: ms(1000)}, 3, ms(500), 0),
	}
}

// TestSetLuaMatchesModel is the set program's Lua/model differential on
// miniredis (the harness's TIME double at a chosen microsecond): seeded
// random sets of 1..4 members of mixed algorithms, random costs and
// gaps, sometimes a malformed member state. Every reply integer and every
// member's stored value equal the model's (EvaluateSet); a set not
// admitted leaves every value unchanged.
func TestSetLuaMatchesModel(t *testing.T) {
	pols := setPolicies(t)
	prog := SetProgram()
	for seed := range uint64(12) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			m := newMini(t)
			rng := rand.New(rand.NewPCG(20261205, seed))
			n := 1 + rng.IntN(4)
			idx := rng.Perm(len(pols))[:n]
			sort.Ints(idx)
			members := make([]ratelimit.Policy, n)
			keys := make([]string, n)
			states := make([]State, n)
			for i, j := range idx {
				members[i] = pols[j]
				keys[i] = fmt.Sprintf("set:%d:%d", seed, i)
			}
			nowMicros := int64(1_700_000_000_000_000)
			admitted, denied := 0, 0
			for step := range 80 {
				nowMicros += rng.Int64N(15_000)
				cost := 1 + rng.Int64N(3)
				if step == 40 && n > 1 {
					// A malformed member state refuses the whole set.
					require.NoError(t, m.c.Set(context.Background(), keys[n-1], "garbage", 0).Err())
					states[n-1] = State("garbage")
				}
				body := harness(true, nowMicros/1_000_000, nowMicros%1_000_000) + luaBody(t, prog.Source)
				res, err := m.c.Eval(context.Background(), body, keys, SetArgs(members, cost)...).Result()
				require.NoError(t, err)
				allowed, replies, err := DecodeSet(res, members)
				wantAllowed, want, next := EvaluateSet(members, states, nowMicros, cost)
				if err != nil {
					// Decode refuses a member reply it would refuse alone
					// (the malformed state's STATE_INCOMPATIBLE passes; a
					// model reply must always decode).
					t.Fatalf("step %d: %v", step, err)
				}
				require.Equal(t, wantAllowed, allowed, "step %d", step)
				require.Equal(t, want, replies, "step %d: every member's reply", step)
				for i, k := range keys {
					got := getState(t, m.c, k)
					require.Equal(t, string(next[i]), string(got), "step %d: member %d's stored value", step, i)
				}
				states = next
				if step == 40 && n > 1 {
					require.False(t, allowed, "a malformed member refuses the set")
					require.Equal(t, StatusStateIncompatible, replies[n-1].Status)
					require.NoError(t, m.c.Del(context.Background(), keys[n-1]).Err())
					states[n-1] = nil
				}
				if allowed {
					admitted++
				} else {
					denied++
				}
			}
			require.Positive(t, admitted, "the trace admits")
			require.Positive(t, denied, "and denies")
		})
	}
}

// TestSetFramingIsChecked: a malformed framing is {5, 0} and writes
// nothing; a member's own argument error is that member's INVALID.
func TestSetFramingIsChecked(t *testing.T) {
	pols := setPolicies(t)
	prog := SetProgram()
	m := newMini(t)
	two := []ratelimit.Policy{pols[0], pols[2]}
	good := SetArgs(two, 1)
	body := harness(true, 1_700_000_000, 0) + luaBody(t, prog.Source)
	run := func(keys []string, args ...any) []int64 {
		v, err := evalInts(context.Background(), m.c, body, keys, args...)
		require.NoError(t, err)
		return v
	}
	keys := []string{"f:a", "f:b"}
	for name, args := range map[string][]any{
		"no count":         {},
		"count 0":          append([]any{int64(0)}, good[1:]...),
		"count 9":          append([]any{int64(9)}, good[1:]...),
		"count above KEYS": append([]any{int64(3)}, good[1:]...),
		"algorithm 7":      append(append([]any{}, good[:1]...), append([]any{int64(7)}, good[2:]...)...),
		"one ARGV short":   good[:len(good)-1],
		"one ARGV extra":   append(append([]any{}, good...), int64(1)),
	} {
		require.Equal(t, []int64{5, 0}, run(keys, args...), name)
	}
	bad := append([]any{}, good...)
	bad[2] = int64(0) // member 1's revision: 0 is out of range
	v := run(keys, bad...)
	require.Len(t, v, 2+2*ReplyLen)
	require.Equal(t, []int64{2, 2, int64(StatusInvalid)}, v[:3], "member 1 INVALID, the set not allowed")
	n, err := m.c.Exists(context.Background(), keys...).Result()
	require.NoError(t, err)
	require.Zero(t, n, "nothing written")
}

// TestRedisSetProgram: on the real server (Redis's own struct library and
// TIME), a set admitted writes every member as its decision program would
// (same value layout, a TTL), and a set one member denies leaves every
// value and TTL as they were.
func TestRedisSetProgram(t *testing.T) {
	// Hour windows: no run may cross an hour's end.
	ratelimittest.ClearOfWindowEnd(t, time.Hour, time.Minute)
	srv := redistest.Start(t)
	c := srv.Client()
	ctx := redisCtx(t)
	hour := time.Hour
	small := mustPolicy(t, ratelimit.AlgorithmFixedWindow, ratelimit.FixedWindow{Limit: 2, Window: hour}, 1, time.Minute, 0)
	large := mustPolicy(t, ratelimit.AlgorithmTokenBucket, ratelimit.TokenBucket{Capacity: 1000, RefillTokens: 1, RefillPeriod: hour}, 1, time.Minute, 0)
	log := mustPolicy(t, ratelimit.AlgorithmSlidingLog, ratelimit.SlidingLog{Limit: 100, Window: hour}, 1, time.Minute, 0)
	members := []ratelimit.Policy{small, large, log}
	keys := []string{"{s}:small", "{s}:large", "{s}:log"}
	prog := SetProgram()
	sha, err := c.ScriptLoad(ctx, prog.Source).Result()
	require.NoError(t, err)
	require.Equal(t, prog.SHA1, sha)
	for i := range 2 {
		res, err := c.EvalSha(ctx, prog.SHA1, keys, SetArgs(members, 1)...).Result()
		require.NoError(t, err)
		allowed, replies, err := DecodeSet(res, members)
		require.NoError(t, err)
		require.True(t, allowed, "set %d", i)
		require.Equal(t, int64(999-i), replies[1].Remaining)
	}
	before := make([]string, len(keys))
	for i, k := range keys {
		before[i], err = c.Get(ctx, k).Result()
		require.NoError(t, err, "member %d written", i)
		ttl, err := c.PTTL(ctx, k).Result()
		require.NoError(t, err)
		require.Positive(t, ttl)
	}
	for range 50 {
		res, err := c.EvalSha(ctx, prog.SHA1, keys, SetArgs(members, 1)...).Result()
		require.NoError(t, err)
		allowed, replies, err := DecodeSet(res, members)
		require.NoError(t, err)
		require.False(t, allowed)
		require.Equal(t, StatusDenied, replies[0].Status)
		require.Equal(t, StatusAllowed, replies[1].Status, "the large member would have admitted")
	}
	for i, k := range keys {
		after, err := c.Get(ctx, k).Result()
		require.NoError(t, err)
		require.Equal(t, before[i], after, "member %d unchanged by 50 denied sets", i)
	}
}

// TestAppendSetArgsIsSetArgs: the prepared members put together per call
// are SetArgs exactly, for every set algorithm's extreme policies, every
// count and several costs, and the prepared parts are never written (a
// second call with another cost leaves the first one's result intact); with a
// cost per member (AppendSetArgsCosts), each member's part carries its own.
func TestAppendSetArgsIsSetArgs(t *testing.T) {
	pols := setPolicies(t)
	extreme := extremePolicies(t)
	names := make([]string, 0, len(extreme))
	for name := range extreme {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if _, ok := SetCode(extreme[name].Algorithm()); ok {
			pols = append(pols, extreme[name])
		}
	}
	prepared := make([]SetMember, len(pols))
	for i, p := range pols {
		m, ok := NewSetMember(p)
		require.True(t, ok, "%v", p.ID())
		prepared[i] = m
	}
	rng := rand.New(rand.NewPCG(7, 11))
	for range 200 {
		n := 1 + rng.IntN(SetMaxMembers)
		idx := make([]int, n)
		members, parts := make([]ratelimit.Policy, n), make([]SetMember, n)
		for i := range idx {
			idx[i] = rng.IntN(len(pols))
			members[i], parts[i] = pols[idx[i]], prepared[idx[i]]
		}
		cost := int64(1 + rng.IntN(3))
		got := AppendSetArgs(nil, parts, cost)
		require.Equal(t, SetArgs(members, cost), got, "members %v cost %d", idx, cost)
		again := AppendSetArgs(make([]any, 0, 4), parts, cost+7)
		require.Equal(t, SetArgs(members, cost+7), again)
		require.Equal(t, SetArgs(members, cost), got, "the first call's ARGV is intact")
		// A cost per member: each member's part is SetArgs of it alone
		// with its own cost.
		costs, want := make([]int64, n), []any{int64(n)}
		for i := range costs {
			costs[i] = int64(1 + rng.IntN(5))
			want = append(want, SetArgs(members[i:i+1], costs[i])[1:]...)
		}
		require.Equal(t, want, AppendSetArgsCosts(nil, parts, costs), "members %v costs %v", idx, costs)
		require.Equal(t, SetArgs(members, cost), got, "the first call's ARGV is intact")
	}
	require.Nil(t, AppendSetArgsCosts(nil, prepared[:2], []int64{1}), "a cost short")
	require.Nil(t, AppendSetArgs(nil, nil, 1), "no member")
	require.Nil(t, AppendSetArgs(nil, make([]SetMember, SetMaxMembers+1), 1), "too many")
	require.Nil(t, AppendSetArgs(nil, []SetMember{{}}, 1), "the zero SetMember")
	_, ok := NewSetMember(ratelimit.Policy{})
	require.False(t, ok, "the zero Policy")
}
