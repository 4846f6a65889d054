package rateplan_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/rateplan"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redisrate"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// TestChangeMidWindowWithAControlledClock (issue 36, done when): for every
// algorithm, on a real server whose clock the test moves (redistest
// WithClock), with one-minute periods: a subject spends free (5), is moved
// to gold (20) 20 s into the window, and spends what it can at the change
// and again 20 s later; in all it is admitted at most max(5, 20) plus what
// the limits add over the interval on the server's clock (the Go model's
// refill: free's before the change, gold's after; a fixed window crossing
// its boundary adds a new window), never a fresh gold on top of free (the
// hour-long tests of store_redis_test.go show that bound failing for a
// fresh state). Moved back to free, its next decision is denied. Two
// minutes on, free's full budget is back.
func TestChangeMidWindowWithAControlledClock(t *testing.T) {
	for _, alg := range algorithms {
		t.Run(alg.Name, func(t *testing.T) {
			t.Parallel()
			srv := redistest.Start(t, redistest.WithClock())
			clock := srv.Clock()
			// One second into a minute, by the server's clock: the steps
			// below (under a minute with the advances) never cross a
			// one-minute window's boundary where the test does not mean
			// one.
			clock.AdvanceToPhase(t, time.Minute, time.Second)
			keys := redistest.RandomKeys(t)
			free := policy(t, polAPIFree, alg.Over(freeLimit, time.Minute))
			gold := policy(t, polAPIGold, alg.Over(goldLimit, time.Minute))
			pols := []ratelimit.Policy{policy(t, polAPI, alg.Over(freeLimit, time.Minute)), free, gold}
			rc := clientAt(t, srv.Addr())
			prov := provider(t, rc, keys, pols)
			store, err := rateplan.NewStore(rc, keys, plansOf(t, pols), pols)
			require.NoError(t, err)
			subject := randomSubject(t)
			ctx := redistest.AdminCtx(t)

			start := serverMillis(t, rc, false)
			admitted := countUntilDenied(t, prov, polAPIFree, subject, 2*goldLimit)
			require.GreaterOrEqual(t, admitted, int64(freeLimit))
			clock.Advance(t, 20*time.Second)
			change := serverMillis(t, rc, false)
			_, err = store.Set(ctx, subject, planGold)
			require.NoError(t, err)
			admitted += countUntilDenied(t, prov, polAPIGold, subject, 2*goldLimit)
			clock.Advance(t, 20*time.Second)
			admitted += countUntilDenied(t, prov, polAPIGold, subject, 2*goldLimit)
			end := serverMillis(t, rc, true)

			bound := int64(goldLimit) + adds(gold, change, end) + adds(free, start, change)
			assert.LessOrEqual(t, admitted, bound, "admitted over the window of the change: at most max(free, gold) plus what they add")

			_, err = store.Set(ctx, subject, planFree)
			require.NoError(t, err)
			assert.False(t, admitted2(t, prov, polAPIFree, subject), "lowered at the next decision")

			clock.Advance(t, 2*time.Minute)
			again := countUntilDenied(t, prov, polAPIFree, subject, 2*goldLimit)
			assert.GreaterOrEqual(t, again, int64(freeLimit)-1, "free's budget is back after its window")
			assert.LessOrEqual(t, again, int64(freeLimit)+adds(free, end, serverMillis(t, rc, true)))
		})
	}
}

// admitted2 reports whether one decision of id for subject admitted.
func admitted2(t *testing.T, p *redisrate.Provider, id ratelimit.PolicyID, subject ratelimit.SubjectDigest) bool {
	t.Helper()
	return admitted(t, ask(p, id, subject))
}
