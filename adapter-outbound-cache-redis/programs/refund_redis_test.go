package programs

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// TestRedisRefundProgramsMatchModel is the refund programs' differential
// test on the real server (ADR 0025), over the differential policies and
// a GCRA one: seeded random sleeps, decisions (EVALSHA of the decision
// program) and refunds (EVALSHA of the refund program) of the latest
// admissions' receipts, some of them stale. Each call is bracketed by the
// server's TIME in one MULTI/EXEC, and the model must give exactly the
// reply and the stored value (or its absence) at some microsecond of the
// reply's millisecond inside that bracket; every write has the model's
// TTL.
func TestRedisRefundProgramsMatchModel(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client()
	ms := func(n int64) time.Duration { return time.Duration(n) * time.Millisecond }
	policies := differentialPolicies(t)
	policies["gcra 5/50ms burst 4"] = mustPolicy(t, ratelimit.AlgorithmGCRA,
		ratelimit.GCRA{Rate: 5, Period: ms(50), Burst: 4}, 4, ms(500), ms(1000))
	// Long windows, so that refunds of the latest receipts give back however
	// slow the round trip is (required below); the short ones above also
	// roll between the calls (stale receipts).
	long := map[string]ratelimit.Policy{
		"long fixed 50/5s":   mustPolicy(t, ratelimit.AlgorithmFixedWindow, ratelimit.FixedWindow{Limit: 50, Window: ms(5000)}, 3, ms(500), 0),
		"long sliding 50/5s": mustPolicy(t, ratelimit.AlgorithmSlidingWindowCounter, ratelimit.SlidingWindowCounter{Limit: 50, Window: ms(5000)}, 3, ms(500), 0),
		"long token 50, 1/5s": mustPolicy(t, ratelimit.AlgorithmTokenBucket,
			ratelimit.TokenBucket{Capacity: 50, RefillTokens: 1, RefillPeriod: ms(5000)}, 3, ms(500), 0),
		"long gcra 1/5s burst 50": mustPolicy(t, ratelimit.AlgorithmGCRA, ratelimit.GCRA{Rate: 1, Period: ms(5000), Burst: 50}, 3, ms(500), 0),
		"long log 50/5s":          mustPolicy(t, ratelimit.AlgorithmSlidingLog, ratelimit.SlidingLog{Limit: 50, Window: ms(5000)}, 3, ms(500), 0),
	}
	for k, p := range long {
		policies[k] = p
	}
	for name, p := range policies {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := redisCtx(t)
			prog, rf := mustProgram(t, p.Algorithm()), mustRefund(t, p.Algorithm())
			for _, pr := range []Program{prog, rf} {
				sha, err := c.ScriptLoad(ctx, pr.Source).Result()
				require.NoError(t, err)
				require.Equal(t, pr.SHA1, sha)
			}
			rng := rand.New(rand.NewPCG(20261205, uint64(len(name))))
			key := "refund:" + name
			var st State
			var receipts [][2]int64
			given, stale := 0, 0
			for step := range 60 {
				time.Sleep(time.Duration(rng.Int64N(8)) * time.Millisecond)
				cost := 1 + rng.Int64N(p.MaxCost())
				refund := len(receipts) > 0 && rng.IntN(5) < 2
				pr, args := prog, Args(p, cost)
				var rc [2]int64
				if refund {
					rc = receipts[len(receipts)-1-rng.IntN(min(len(receipts), 3))]
					pr, args = rf, RefundArgs(p, rc[1], rc[0])
				}
				res := gcraTx(t, ctx, c, pr, 1, key, args...)
				got, stored := res.replies[0], res.states[0]
				lo := max(res.from, got.ServerNowMillis*1000)
				hi := min(res.to, got.ServerNowMillis*1000+999)
				matched := false
				var next State
				for u := lo; u <= hi && !matched; u++ {
					var want Reply
					if refund {
						want, next = RefundMicros(p, st, u, rc[1], rc[0])
					} else {
						want, next = EvaluateMicros(p, st, u, cost)
					}
					matched = want == got && string(next) == string(stored) && (next == nil) == (stored == nil)
				}
				require.True(t, matched, "step %d (refund %v %v): reply %+v, stored %v, from state %v in [%d, %d] µs",
					step, refund, rc, got, stored, st, res.from, res.to)
				wrote := string(next) != string(st) || (next == nil) != (st == nil)
				st = next
				if wrote && st != nil {
					requireExpiryAt(t, res.after.expireAt, p, got)
				}
				switch {
				case !refund && got.Status == StatusAllowed:
					receipts = append(receipts, [2]int64{got.EffectiveNowMillis, cost})
				case refund && got.RetryAfterMillis > 0:
					given++
				case refund:
					stale++
				}
			}
			t.Logf("%s: %d refunds gave back, %d were stale", name, given, stale)
			if _, ok := long[name]; ok {
				require.Positive(t, given, "a refund of one of the latest three admissions within 5 s gives back")
			}
		})
	}
}
