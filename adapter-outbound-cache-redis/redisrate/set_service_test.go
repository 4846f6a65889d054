package redisrate

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit/ratelimittest"
)

func askSet(p ratelimit.EdgePort, subject ratelimit.SubjectDigest, members ...ratelimit.PolicyID) ratelimit.Outcome {
	return p.EvaluateSet(context.Background(), ratelimit.SetRequest{Members: members, SubjectDigest: subject, Cost: 1, Deadline: time.Now().Add(30 * time.Second)})
}

func remainingOf(t *testing.T, out ratelimit.Outcome) int64 {
	t.Helper()
	ev, ok := out.(ratelimit.Evaluated)
	require.True(t, ok, "%v", out)
	return ev.Decision.Remaining
}

// TestServiceSetDenialConsumesNothing: all or nothing on a real server
// (ADR 0027). A subject hammering its small member is denied without
// consuming anything of the large one, whichever of the two is decided
// first: when the large member comes first, each of its admissions is
// given back.
func TestServiceSetDenialConsumesNothing(t *testing.T) {
	srv := redistest.Start(t)
	ratelimittest.ClearOfWindowEnd(t, time.Hour, time.Minute)
	for _, params := range []ratelimit.Params{
		ratelimit.FixedWindow{Limit: 1000, Window: time.Hour},
		ratelimit.SlidingWindowCounter{Limit: 1000, Window: time.Hour},
		ratelimit.TokenBucket{Capacity: 1000, RefillTokens: 1, RefillPeriod: time.Hour},
		ratelimit.GCRA{Rate: 1, Period: time.Hour, Burst: 1000},
		ratelimit.SlidingLog{Limit: 1000, Window: time.Hour},
	} {
		t.Run(params.Algorithm().String(), func(t *testing.T) { setDenialConsumesNothing(t, srv, params) })
	}
}

func setDenialConsumesNothing(t *testing.T, srv *redistest.Server, params ratelimit.Params) {
	small := fixedPolicy(t, "small", 3, time.Hour)
	large := mustPolicy(t, ratelimit.PolicySpec{ID: "large", Params: params, MaxClockRegression: 2 * time.Second})
	p := serviceProvider(t, srv, randomKeys(t), []ratelimit.Policy{small, large}, nil)
	for _, order := range [][]ratelimit.PolicyID{{"small", "large"}, {"large", "small"}} {
		s := randomSubject(t)
		for i := range 3 {
			out := askSet(p, s, order...)
			require.True(t, ratelimit.Admitted(out), "%v: request %d: %v", order, i, out)
			require.Len(t, out.(ratelimit.Evaluated).Members, 2)
		}
		before := redistest.CommandStats(t, srv.Client())
		for i := range 1000 {
			out := askSet(p, s, order...)
			ev, ok := out.(ratelimit.Evaluated)
			require.True(t, ok, "%v: denial %d: %v", order, i, out)
			require.False(t, ev.Decision.Allowed)
			require.Equal(t, ratelimit.PolicyID("small"), ev.Decision.PolicyID, "the denying member speaks for the set")
			require.Positive(t, ev.Decision.RetryAfter)
		}
		after := redistest.CommandStats(t, srv.Client())
		calls := after["evalsha"].Calls + after["eval"].Calls - before["evalsha"].Calls - before["eval"].Calls
		assert.Equal(t, int64(1000), calls, "%v: one program call per set (ADR 0026), no refund", order)
		assert.Equal(t, int64(1000-3-1), remainingOf(t, ask(p, "large", s, 1)), "%v: 1,000 denials consumed nothing of the large member", order)
	}
	assert.Zero(t, p.SetRefundFailures())
}

// TestServiceSetNeverAdmitsBeyondAnyMember: 4 providers x 16 goroutines on
// one subject set and one global member: no member admits beyond its
// limit, and every admitted set is admitted by all its members.
func TestServiceSetNeverAdmitsBeyondAnyMember(t *testing.T) {
	srv := redistest.Start(t)
	keys := randomKeys(t)
	perClient := fixedPolicy(t, "per-client", 20, time.Hour)
	global := mustPolicy(t, ratelimit.PolicySpec{ID: "backend", Params: ratelimit.FixedWindow{Limit: 50, Window: time.Hour}, Scope: ratelimit.ScopeGlobal})
	pols := []ratelimit.Policy{perClient, global}
	ratelimittest.ClearOfWindowEnd(t, time.Hour, time.Minute)
	var providers []*Provider
	for range 4 {
		providers = append(providers, serviceProvider(t, srv, keys, pols, nil))
	}
	subjects := []ratelimit.SubjectDigest{randomSubject(t), randomSubject(t), randomSubject(t), randomSubject(t)}
	var perSubject [4]atomic.Int64
	var total atomic.Int64
	var wg sync.WaitGroup
	for g := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := providers[g%4]
			for i := range 10 {
				k := (g + i) % 4
				if ratelimit.Admitted(askSet(p, subjects[k], "per-client", "backend")) {
					perSubject[k].Add(1)
					total.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	assert.LessOrEqual(t, total.Load(), int64(50), "the global member's limit")
	for k := range perSubject {
		assert.LessOrEqual(t, perSubject[k].Load(), int64(20), "subject %d's member limit", k)
	}
	// What the server holds agrees: the global budget has exactly what was
	// admitted taken (refunds gave back every other admission).
	probe := ask(providers[0], "backend", randomSubject(t), 1)
	if total.Load() < 50 {
		require.True(t, ratelimit.Admitted(probe), "%d admitted: the global budget has room: %v", total.Load(), probe)
		assert.Equal(t, 50-total.Load()-1, remainingOf(t, probe))
	} else {
		assert.False(t, ratelimit.Admitted(probe), "the global budget is spent")
	}
	assert.Zero(t, providers[0].SetRefundFailures()+providers[1].SetRefundFailures()+providers[2].SetRefundFailures()+providers[3].SetRefundFailures())
}
