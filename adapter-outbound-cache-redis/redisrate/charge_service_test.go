package redisrate

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit/ratelimittest"
)

// TestEvaluateAfterChargeCountsTheCharge: the charge is pipelined ahead of
// the decision on one connection, so the decision counts it; also after
// SCRIPT FLUSH (the charge goes as EVAL, the decision falls back from
// NOSCRIPT to EVAL behind it) and for a dedup request. Charge alone
// charges without deciding. Bad units are refused unsent.
func TestEvaluateAfterChargeCountsTheCharge(t *testing.T) {
	srv := redistest.Start(t)
	ownServer(t, srv)
	keys := randomKeys(t)
	fw := fixedPolicy(t, "fw", 10, time.Hour)
	dd := mustPolicy(t, ratelimit.PolicySpec{ID: "dd", Revision: 1, Algorithm: ratelimit.AlgorithmFixedWindow,
		Params: ratelimit.FixedWindow{Limit: 10, Window: time.Hour}, MaxCost: 1, CleanupGrace: time.Minute,
		MaxClockRegression: 2 * time.Second, DedupWindow: time.Minute})
	ratelimittest.ClearOfWindowEnd(t, time.Hour, time.Minute)
	p := serviceProvider(t, srv, keys, []ratelimit.Policy{fw, dd}, nil)
	req := func(id ratelimit.PolicyID, evalID ratelimit.EvaluationID, s ratelimit.SubjectDigest) ratelimit.Request {
		return ratelimit.Request{PolicyID: id, SubjectDigest: s, Cost: 1, EvaluationID: evalID, Deadline: time.Now().Add(5 * time.Second)}
	}
	remaining := func(out ratelimit.Outcome) int64 {
		t.Helper()
		require.Equal(t, ratelimit.KindEvaluated, out.Kind(), "%v", out)
		return out.(ratelimit.Evaluated).Decision.Remaining
	}

	s := randomSubject(t)
	out, charged := p.EvaluateAfterCharge(context.Background(), req("fw", "", s), 4)
	assert.True(t, charged)
	assert.Equal(t, int64(5), remaining(out), "10 - 4 charged - 1 decided")

	require.NoError(t, srv.Client().ScriptFlush(redistest.AdminCtx(t)).Err())
	out, charged = p.EvaluateAfterCharge(context.Background(), req("fw", "", s), 3)
	assert.True(t, charged)
	assert.Equal(t, int64(1), remaining(out), "after SCRIPT FLUSH: 5 - 3 - 1")

	out, charged = p.EvaluateAfterCharge(context.Background(), req("fw", "", s), 10)
	assert.True(t, charged)
	assert.False(t, out.(ratelimit.Evaluated).Decision.Allowed, "the charge saturates; the decision denies")

	d := randomSubject(t)
	out, charged = p.EvaluateAfterCharge(context.Background(), req("dd", "id-1", d), 2)
	assert.True(t, charged)
	assert.Equal(t, int64(7), remaining(out), "dedup: 10 - 2 - 1")

	c := randomSubject(t)
	out = p.Charge(context.Background(), req("fw", "", c), 6)
	assert.True(t, ratelimit.Admitted(out), "charged: %v", out)
	assert.Equal(t, int64(3), remaining(p.Evaluate(context.Background(), req("fw", "", c))), "10 - 6 - 1")

	for _, units := range []int64{0, -1, 11} {
		out, charged = p.EvaluateAfterCharge(context.Background(), req("fw", "", c), units)
		assert.False(t, charged)
		assert.Equal(t, ratelimit.CategoryInvalidRequest, ratelimit.CategoryOf(out), "units %d", units)
		assert.Equal(t, ratelimit.CategoryInvalidRequest, ratelimit.CategoryOf(p.Charge(context.Background(), req("fw", "", c), units)))
	}
	out, charged = p.EvaluateAfterCharge(context.Background(), req("nope", "", c), 1)
	assert.False(t, charged)
	assert.Equal(t, ratelimit.CategoryUnknownPolicy, ratelimit.CategoryOf(out))
	assert.Equal(t, int64(2), remaining(p.Evaluate(context.Background(), req("fw", "", c))), "nothing charged by the refusals")
}
