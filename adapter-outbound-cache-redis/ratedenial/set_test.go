package ratedenial_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/programs"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/ratedenial"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit/ratelimittest"
)

// setModel is a modelServer that also evaluates sets all or nothing: every
// member decided on the model at one instant, the states written only when
// all admit.
type setModel struct {
	*modelServer
	sets int
}

func (m *setModel) EvaluateSet(_ context.Context, req ratelimit.SetRequest) ratelimit.Outcome {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sets++
	now := m.clock.Now().UnixMicro()
	var members []ratelimit.Decision
	next := map[string]programs.State{}
	all := true
	for _, id := range req.Members {
		p := m.pols[id]
		k := string(id) + "/" + string(p.Subject(req.SubjectDigest))
		r, st := programs.EvaluateMicros(p, m.state[k], now, req.Cost)
		allowed := r.Status == programs.StatusAllowed
		all = all && allowed
		next[k] = st
		members = append(members, ratelimit.Decision{
			Allowed: allowed, Limit: r.Limit, Remaining: r.Remaining,
			RetryAfter: time.Duration(r.RetryAfterMillis) * time.Millisecond, ResetAt: time.UnixMilli(r.ResetAtMillis),
			ServerNow: time.UnixMilli(r.ServerNowMillis), PolicyID: p.ID(), PolicyRevision: p.Revision(),
			Source: ratelimit.GlobalRedis, Certainty: p.Certainty(),
		})
	}
	if all {
		for k, st := range next {
			m.state[k] = st
		}
	}
	return ratelimit.Evaluated{Decision: members[ratelimit.Deciding(members)], Members: members}
}

// TestSetDenialIsCachedPerMember: a set denied by its per-second member is
// answered locally while that member's denial holds, and the per-day
// member is charged nothing by those requests; an expired entry goes to
// the server again.
func TestSetDenialIsCachedPerMember(t *testing.T) {
	sec := policy(t, "per-second", 1, ratelimit.FixedWindow{Limit: 2, Window: time.Second}, 1)
	day := policy(t, "per-day", 1, ratelimit.FixedWindow{Limit: 100, Window: 24 * time.Hour}, 1)
	clk := ratelimittest.NewClock(time.Unix(1_000_000, 0))
	m := &setModel{modelServer: newModelServer(clk, func() time.Duration { return 0 }, sec, day)}
	c := cache(t, m, ratedenial.Options{Policies: []ratelimit.Policy{sec, day}, Keys: randomKeys(t), Now: clk.Now})
	s := randomSubject(t)
	req := func() ratelimit.SetRequest {
		return ratelimit.SetRequest{Members: []ratelimit.PolicyID{"per-second", "per-day"}, SubjectDigest: s, Cost: 1, Deadline: clk.Now().Add(time.Second)}
	}
	ctx := context.Background()
	for i := range 2 {
		require.True(t, ratelimit.Admitted(c.EvaluateSet(ctx, req())), "request %d", i)
	}
	out := c.EvaluateSet(ctx, req())
	require.False(t, ratelimit.Admitted(out))
	require.Equal(t, 3, m.sets)
	for range 1000 {
		out = c.EvaluateSet(ctx, req())
		ev := out.(ratelimit.Evaluated)
		require.False(t, ev.Decision.Allowed)
		require.Equal(t, ratelimit.PolicyID("per-second"), ev.Decision.PolicyID)
		require.Len(t, ev.Members, 1)
	}
	assert.Equal(t, 3, m.sets, "1,000 denials answered locally")
	assert.Equal(t, uint64(1000), c.Stats().Hits)

	clk.Set(clk.Now().Add(time.Second))
	out = c.EvaluateSet(ctx, req())
	require.True(t, ratelimit.Admitted(out), "the next second admits again")
	assert.Equal(t, 4, m.sets)
	ev := out.(ratelimit.Evaluated)
	require.Len(t, ev.Members, 2)
	assert.Equal(t, int64(97), ev.Members[1].Remaining, "per-day spent 3: the denied requests took nothing")
	// A decorated port without sets no longer compiles (ADR 0033).
}

// refunding is a port that denies every request and counts refunds.
type refunding struct {
	ratelimittestFunc
	refunds int
}

func (r *refunding) Refund(context.Context, ratelimit.Request, ratelimit.Receipt) ratelimit.Outcome {
	r.refunds++
	return ratelimit.Evaluated{Decision: ratelimit.Decision{Allowed: true, Refunded: 1}}
}

// TestRefundDropsTheCachedDenial: a refund passes to the decorated port
// and drops this instance's cached denial of the subject, so the next
// request asks the server again.
func TestRefundDropsTheCachedDenial(t *testing.T) {
	p := policy(t, "p", 1, ratelimit.FixedWindow{Limit: 5, Window: time.Minute}, 5)
	clk := ratelimittest.NewClock(time.Unix(1_000_000, 0))
	calls := 0
	inner := &refunding{ratelimittestFunc: func(req ratelimit.Request) ratelimit.Outcome {
		calls++
		return ratelimit.Evaluated{Decision: ratelimit.Decision{PolicyID: "p", PolicyRevision: 1, Limit: 5, RetryAfter: 10 * time.Second,
			ServerNow: clk.Now(), ResetAt: clk.Now().Add(time.Minute), Source: ratelimit.GlobalRedis}}
	}}
	c := cache(t, inner, ratedenial.Options{Policies: []ratelimit.Policy{p}, Keys: randomKeys(t), Now: clk.Now})
	s := randomSubject(t)
	req := ratelimit.Request{PolicyID: "p", SubjectDigest: s, Cost: 1, Deadline: clk.Now().Add(time.Second)}
	ctx := context.Background()
	c.Evaluate(ctx, req)
	c.Evaluate(ctx, req)
	require.Equal(t, 1, calls, "the second denial is cached")
	out := c.Refund(ctx, req, ratelimit.NewReceipt("p", 1, 1, clk.Now().UnixMilli(), ratelimit.GlobalRedis))
	assert.Equal(t, int64(1), out.(ratelimit.Evaluated).Decision.Refunded)
	assert.Equal(t, 1, inner.refunds)
	c.Evaluate(ctx, req)
	assert.Equal(t, 2, calls, "after the refund the server is asked again")
	// A decorated port without refunds no longer compiles (ADR 0033).
}
