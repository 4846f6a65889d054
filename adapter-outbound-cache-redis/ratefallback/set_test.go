package ratefallback_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/ratefallback"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redisrate"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit/ratelimittest"
)

func askSet(p ratelimit.EdgePort, subject ratelimit.SubjectDigest, members ...ratelimit.PolicyID) ratelimit.Outcome {
	return p.EvaluateSet(context.Background(), ratelimit.SetRequest{Members: members, SubjectDigest: subject, Cost: 1,
		Deadline: time.Now().Add(redisrate.EvaluationTimeout(redisrate.DefaultCommandTimeout, false))})
}

// TestSetFallsBackAllOrNothing: with Redis down, a set of local-fallback
// members is decided on their local shares all or nothing (ADR 0027): the
// denials of the small member take nothing of the large one; a set with
// a fail-closed member fails closed; with Redis back, what was admitted
// locally is charged before the set's global decision.
func TestSetFallsBackAllOrNothing(t *testing.T) {
	srv := redistest.Start(t)
	small := localPolicy(t, "small", ratelimit.FixedWindow{Limit: 6, Window: time.Hour}, 1, 2)   // share 3
	large := localPolicy(t, "large", ratelimit.FixedWindow{Limit: 200, Window: time.Hour}, 1, 2) // share 100
	closed := localPolicy(t, "closed", ratelimit.FixedWindow{Limit: 200, Window: time.Hour}, 1, 0)
	pols := []ratelimit.Policy{small, large, closed}
	ratelimittest.ClearOfWindowEnd(t, time.Hour, time.Minute)
	fb := fallback(t, provider(t, srv, randomKeys(t), pols, 0), pols, func(o *ratefallback.Options) { o.ReconcileEvery = time.Minute })
	s := randomSubject(t)
	require.True(t, ratelimit.Admitted(askSet(fb, s, "small", "large")), "Redis up: decided globally")
	srv.Kill()

	admitted := 0
	for i := range 50 {
		out := askSet(fb, s, "small", "large")
		ev, ok := out.(ratelimit.Evaluated)
		require.True(t, ok, "call %d: %v", i, out)
		require.Len(t, ev.Members, 2)
		require.Equal(t, ratelimit.LocalEmergency, ev.Decision.Source)
		if ev.Decision.Allowed {
			admitted++
		} else {
			require.Equal(t, ratelimit.PolicyID("small"), ev.Decision.PolicyID)
		}
	}
	assert.Equal(t, 3, admitted, "the small member's share")
	assert.Equal(t, map[ratelimit.PolicyID]int64{"small": 3, "large": 3}, fb.Stats().Pending, "the large member took only the admitted sets")
	out := askSet(fb, s, "large", "closed")
	assert.Equal(t, ratelimit.CategoryConnection, ratelimit.CategoryOf(out), "a fail-closed member fails the set closed: %v", out)

	srv.Restart()
	var d ratelimit.Decision
	for stop := time.Now().Add(5 * time.Second); d.Source != ratelimit.GlobalRedis; {
		require.True(t, time.Now().Before(stop), "no global decision: %v", out)
		out = askSet(fb, s, "small", "large")
		require.Equal(t, ratelimit.KindEvaluated, out.Kind(), "%v", out)
		d = out.(ratelimit.Evaluated).Decision
		time.Sleep(20 * time.Millisecond)
	}
	assert.False(t, d.Allowed, "1 global + 3 local + 3 reserved of small's 6: used up")
	assert.Equal(t, int64(0), fb.Stats().Pending["small"], "charged before the set's global decision")
	assert.Equal(t, int64(0), fb.Stats().Pending["large"])
}
