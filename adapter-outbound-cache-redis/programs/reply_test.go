package programs

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// TestReplyCheckAcceptsEveryModelReply: Check never rejects a reply the
// programs can give: random traffic on random policies, with regressions,
// unsafe clocks, malformed states and invalid costs, covers all five
// statuses.
func TestReplyCheckAcceptsEveryModelReply(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	seen := map[Status]int{}
	for i := 0; i < 400; i++ {
		p := randomPolicy(t, rng)
		var st State
		now := t0
		for step := 0; step < 30; step++ {
			switch rng.IntN(20) {
			case 0:
				now -= p.MaxClockRegression().Milliseconds() + 1 + rng.Int64N(50)
			case 1:
				now = ratelimit.MaxServerMillis + 1 + rng.Int64N(10)
			default:
				now = max(now, t0) + rng.Int64N(700)
			}
			cost := 1 + rng.Int64N(p.MaxCost())
			if rng.IntN(25) == 0 {
				cost = p.Limit() + 1
			}
			probe := st
			bad := false
			if rng.IntN(25) == 0 && len(st) > 0 {
				probe = cloneState(st)
				probe[0] = 9<<4 | probe[0]&15 // schema 9
				bad = true
			}
			r, next := Evaluate(p, probe, now, cost)
			seen[r.Status]++
			require.NoError(t, r.Check(p), "%v: %+v", p, r)
			if bad {
				continue
			}
			st = next
		}
	}
	for s := StatusAllowed; s <= StatusInvalid; s++ {
		require.Positive(t, seen[s], "status %v covered", s)
	}
}

// TestReplyCheckRejects: every inconsistent reply shape is an error wrapping
// ErrMalformedReply.
func TestReplyCheckRejects(t *testing.T) {
	ms := time.Millisecond
	fixed := mustPolicy(t, ratelimit.AlgorithmFixedWindow, ratelimit.FixedWindow{Limit: 5, Window: 1000 * ms}, 5, time.Second, 1000*ms)
	sliding := mustPolicy(t, ratelimit.AlgorithmSlidingWindowCounter, ratelimit.SlidingWindowCounter{Limit: 5, Window: 1000 * ms}, 5, time.Second, 1000*ms)
	token := mustPolicy(t, ratelimit.AlgorithmTokenBucket, ratelimit.TokenBucket{Capacity: 10, RefillTokens: 3, RefillPeriod: 1000 * ms}, 10, time.Second, 1000*ms)
	const now = t0 + 250
	allowF := Reply{StatusAllowed, now, now, 5, 2, 0, t0 + 1000}
	denyF := Reply{StatusDenied, now, now, 5, 0, 750, t0 + 1000}
	allowS := Reply{StatusAllowed, now, now, 5, 2, 0, t0 + 2000}
	denyS := Reply{StatusDenied, now, now, 5, 0, 100, t0 + 1000}
	allowT := Reply{StatusAllowed, now, now, 10, 3, 0, now + 2334}
	denyT := Reply{StatusDenied, now, now, 10, 0, 334, now + 3334}
	unsafe := Reply{Status: StatusClockUnsafe, ServerNowMillis: now, EffectiveNowMillis: now + 1500, RetryAfterMillis: 500}
	for _, ok := range []struct {
		p ratelimit.Policy
		r Reply
	}{{fixed, allowF}, {fixed, denyF}, {sliding, allowS}, {sliding, denyS}, {sliding, Reply{StatusDenied, now, now, 5, 0, 100, t0 + 2000}},
		{token, allowT}, {token, denyT}, {fixed, unsafe}, {fixed, Reply{Status: StatusClockUnsafe}},
		{fixed, Reply{Status: StatusInvalid, ServerNowMillis: now}}, {fixed, Reply{Status: StatusStateIncompatible}}} {
		require.NoError(t, ok.r.Check(ok.p), "baseline %+v", ok.r)
	}
	edit := func(r Reply, f func(*Reply)) Reply { f(&r); return r }
	cases := []struct {
		name string
		p    ratelimit.Policy
		r    Reply
	}{
		{"zero policy", ratelimit.Policy{}, allowF},
		{"status 0", fixed, edit(allowF, func(r *Reply) { r.Status = 0 })},
		{"status 6", fixed, edit(allowF, func(r *Reply) { r.Status = 6 })},
		{"negative field", fixed, edit(allowF, func(r *Reply) { r.Remaining = -1 })},
		{"field above 2^53-1", fixed, edit(allowF, func(r *Reply) { r.ResetAtMillis = ratelimit.MaxExactInt + 1 })},
		{"serverNow above S", fixed, edit(allowF, func(r *Reply) { r.ServerNowMillis = ratelimit.MaxServerMillis + 1 })},
		{"limit differs from policy", fixed, edit(allowF, func(r *Reply) { r.Limit = 6 })},
		{"remaining > limit", fixed, edit(denyF, func(r *Reply) { r.Remaining = 6 })},
		{"allowed with remaining = limit", fixed, edit(allowF, func(r *Reply) { r.Remaining = 5 })},
		{"effectiveNow < serverNow", fixed, edit(allowF, func(r *Reply) { r.EffectiveNowMillis = now - 1 })},
		{"effectiveNow beyond regression", fixed, edit(allowF, func(r *Reply) { r.ServerNowMillis = now - 1001 })},
		{"effectiveNow above S", fixed, edit(allowF, func(r *Reply) {
			r.ServerNowMillis, r.EffectiveNowMillis, r.ResetAtMillis = ratelimit.MaxServerMillis, ratelimit.MaxServerMillis+1, ratelimit.MaxServerMillis+1000
		})},
		{"resetAt = effectiveNow", token, edit(allowT, func(r *Reply) { r.ResetAtMillis = now })},
		{"resetAt before effectiveNow", token, edit(allowT, func(r *Reply) { r.ResetAtMillis = now - 1 })},
		{"resetAt beyond the fill horizon", token, edit(denyT, func(r *Reply) { r.ResetAtMillis = now + 3335 })},
		{"resetAt beyond two windows", sliding, edit(allowS, func(r *Reply) { r.ResetAtMillis = now + 2001 })},
		{"allowed with retry", fixed, edit(allowF, func(r *Reply) { r.RetryAfterMillis = 1 })},
		{"denied without retry", token, edit(denyT, func(r *Reply) { r.RetryAfterMillis = 0 })},
		{"retry beyond reset", token, edit(denyT, func(r *Reply) { r.RetryAfterMillis = 3335 })},
		{"fixed reset not the window end", fixed, edit(allowF, func(r *Reply) { r.ResetAtMillis = t0 + 999 })},
		{"fixed denied retry not to the window end", fixed, edit(denyF, func(r *Reply) { r.RetryAfterMillis = 749 })},
		{"sliding allowed reset one window", sliding, edit(allowS, func(r *Reply) { r.ResetAtMillis = t0 + 1000 })},
		{"sliding reset unaligned", sliding, edit(denyS, func(r *Reply) { r.ResetAtMillis = t0 + 1500 })},
		{"unsafe with limit", fixed, edit(unsafe, func(r *Reply) { r.Limit = 5 })},
		{"unsafe with remaining", fixed, edit(unsafe, func(r *Reply) { r.Remaining = 1 })},
		{"unsafe with reset", fixed, edit(unsafe, func(r *Reply) { r.ResetAtMillis = now })},
		{"unsafe regression within tolerance", fixed, edit(unsafe, func(r *Reply) { r.EffectiveNowMillis, r.RetryAfterMillis = now+1000, 0 })},
		{"unsafe wrong retry", fixed, edit(unsafe, func(r *Reply) { r.RetryAfterMillis = 499 })},
		{"unsafe lastObserved above S", fixed, Reply{Status: StatusClockUnsafe, ServerNowMillis: 1, EffectiveNowMillis: ratelimit.MaxServerMillis + 1, RetryAfterMillis: ratelimit.MaxServerMillis - 1000}},
		{"unsafe future with serverNow", fixed, Reply{Status: StatusClockUnsafe, ServerNowMillis: now}},
		{"unsafe future with retry", fixed, Reply{Status: StatusClockUnsafe, RetryAfterMillis: 1}},
		{"incompatible with effectiveNow", fixed, Reply{Status: StatusStateIncompatible, ServerNowMillis: now, EffectiveNowMillis: now}},
		{"incompatible with limit", fixed, Reply{Status: StatusStateIncompatible, ServerNowMillis: now, Limit: 5}},
		{"invalid with remaining", fixed, Reply{Status: StatusInvalid, ServerNowMillis: now, Remaining: 1}},
		{"invalid with retry", fixed, Reply{Status: StatusInvalid, RetryAfterMillis: 1}},
		{"invalid with reset", fixed, Reply{Status: StatusInvalid, ResetAtMillis: 1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.r.Check(c.p)
			require.ErrorIs(t, err, ErrMalformedReply, "%+v", c.r)
		})
	}
}

// TestReplyWireOrder: ReplyOf and Ints follow the Reply* indices.
func TestReplyWireOrder(t *testing.T) {
	v := [ReplyLen]int64{1, 2, 3, 4, 5, 6, 7}
	r := ReplyOf(v)
	require.Equal(t, Reply{StatusAllowed, 2, 3, 4, 5, 6, 7}, r)
	require.Equal(t, v, r.Ints())
	require.Equal(t, 7, ReplyLen)
	require.Equal(t, "STATE_INCOMPATIBLE", StatusStateIncompatible.String())
	require.Equal(t, "Status(9)", Status(9).String())
	require.False(t, Status(0).Valid())
	require.True(t, StatusInvalid.Valid())
}

// TestArgs: the ARGV positions and counts the programs document.
func TestArgs(t *testing.T) {
	fixed := mustPolicy(t, ratelimit.AlgorithmFixedWindow, ratelimit.FixedWindow{Limit: 5, Window: 1500 * time.Millisecond}, 5, 2*time.Second, 250*time.Millisecond)
	require.Equal(t, []any{int64(7), int64(3), int64(250), int64(2000), int64(5), int64(1500)}, Args(fixed, 3))
	sliding := mustPolicy(t, ratelimit.AlgorithmSlidingWindowCounter, ratelimit.SlidingWindowCounter{Limit: 9, Window: time.Minute}, 9, time.Second, 0)
	require.Equal(t, []any{int64(7), int64(1), int64(0), int64(1000), int64(9), int64(60000)}, Args(sliding, 1))
	token := mustPolicy(t, ratelimit.AlgorithmTokenBucket, ratelimit.TokenBucket{Capacity: 10, RefillTokens: 3, RefillPeriod: 7 * time.Millisecond}, 4, time.Second, time.Second)
	args := Args(token, 4)
	require.Equal(t, []any{int64(7), int64(4), int64(1000), int64(1000), int64(10), int64(3), int64(7)}, args)
	require.Equal(t, int64(3), args[ArgRefillTokens])
	require.Equal(t, int64(7), args[ArgRefillPeriod])
	require.Equal(t, int64(10), args[ArgLimit])
	require.Len(t, args, ArgCountTokenBucket)
	require.Len(t, Args(fixed, 1), ArgCountWindow)
	require.Empty(t, Args(ratelimit.Policy{}, 1), "the zero policy gets an ARGV every program refuses")

	buf := make([]any, 0, 16)
	buf = appendArgs(buf, fixed, 1)
	buf = appendArgs(buf, token, 2)
	require.Len(t, buf, ArgCountWindow+ArgCountTokenBucket)
	allocs := testing.AllocsPerRun(100, func() { buf = appendArgs(buf[:0], token, 2) })
	require.LessOrEqual(t, allocs, float64(ArgCountTokenBucket), "no allocation beyond boxing the integers")
}
