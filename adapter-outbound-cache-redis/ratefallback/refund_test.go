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

// TestLocalRefund: with Redis down, a local admission's receipt gives it
// back on the local share (and it is no longer owed to Redis); a Redis
// admission's receipt goes to the provider (ADR 0025).
func TestLocalRefund(t *testing.T) {
	srv := redistest.Start(t)
	lf := localPolicy(t, "lf", ratelimit.FixedWindow{Limit: 10, Window: time.Hour}, 1, 2) // share 5
	pols := []ratelimit.Policy{lf}
	ratelimittest.ClearOfWindowEnd(t, time.Hour, time.Minute)
	fb := fallback(t, provider(t, srv, randomKeys(t), pols, 0), pols, func(o *ratefallback.Options) { o.ReconcileEvery = time.Minute })
	s := randomSubject(t)
	// Each call gets its own deadline, as the edge gives each request one:
	// a deadline taken once would lapse while the container lane stops its
	// server (seconds), and the local decision would rightly refuse it.
	req := func() ratelimit.Request {
		return ratelimit.Request{PolicyID: "lf", SubjectDigest: s, Cost: 1, Deadline: time.Now().Add(redisrate.EvaluationTimeout(redisrate.DefaultCommandTimeout, false))}
	}

	out := fb.Evaluate(context.Background(), req())
	require.True(t, ratelimit.Admitted(out), "%v", out)
	global := out.(ratelimit.Evaluated).Decision
	require.Equal(t, ratelimit.GlobalRedis, global.Receipt.Source())
	back := fb.Refund(context.Background(), req(), global.Receipt)
	require.Equal(t, ratelimit.KindEvaluated, back.Kind(), "%v", back)
	assert.Equal(t, int64(1), back.(ratelimit.Evaluated).Decision.Refunded, "given back in Redis")

	srv.Kill()
	var last ratelimit.Decision
	for i := range 3 {
		out := fb.Evaluate(context.Background(), req())
		require.True(t, ratelimit.Admitted(out), "local %d: %v", i, out)
		last = out.(ratelimit.Evaluated).Decision
	}
	require.Equal(t, ratelimit.LocalEmergency, last.Receipt.Source())
	assert.Equal(t, int64(2), last.Remaining)
	assert.Equal(t, int64(3), fb.Stats().Pending["lf"])
	back = fb.Refund(context.Background(), req(), last.Receipt)
	require.Equal(t, ratelimit.KindEvaluated, back.Kind(), "%v", back)
	bd := back.(ratelimit.Evaluated).Decision
	assert.Equal(t, int64(1), bd.Refunded)
	assert.Equal(t, int64(3), bd.Remaining)
	assert.Equal(t, int64(2), fb.Stats().Pending["lf"], "no longer owed to Redis")
	out = fb.Evaluate(context.Background(), req())
	assert.Equal(t, int64(2), out.(ratelimit.Evaluated).Decision.Remaining, "as if the refunded admission had not been")
	assert.Equal(t, ratelimit.CategoryInvalidRequest, ratelimit.CategoryOf(fb.Refund(context.Background(), req(), ratelimit.Receipt{})))

	srv.Restart()
	for stop := time.Now().Add(5 * time.Second); ; {
		require.True(t, time.Now().Before(stop), "no global decision")
		if out := fb.Evaluate(context.Background(), req()); out.Kind() == ratelimit.KindEvaluated && out.(ratelimit.Evaluated).Decision.Source == ratelimit.GlobalRedis {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
}
