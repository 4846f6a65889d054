package redisrate

import (
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit/ratelimittest"
)

// TestServiceRefundGivesBackTheAdmission: for every algorithm on a real
// server, an admission refunded with its receipt leaves the next decision
// as it would have been without it (ADR 0025, the port step).
func TestServiceRefundGivesBackTheAdmission(t *testing.T) {
	srv := redistest.Start(t)
	ratelimittest.ClearOfWindowEnd(t, time.Hour, time.Minute)
	for _, params := range []ratelimit.Params{
		ratelimit.FixedWindow{Limit: 10, Window: time.Hour},
		ratelimit.SlidingWindowCounter{Limit: 10, Window: time.Hour},
		ratelimit.TokenBucket{Capacity: 10, RefillTokens: 1, RefillPeriod: time.Hour},
		ratelimit.GCRA{Rate: 1, Period: time.Hour, Burst: 10},
		ratelimit.SlidingLog{Limit: 10, Window: time.Hour},
	} {
		t.Run(params.Algorithm().String(), func(t *testing.T) {
			pol := mustPolicy(t, ratelimit.PolicySpec{ID: "r", Params: params, MaxCost: 3, MaxClockRegression: 2 * time.Second})
			p := serviceProvider(t, srv, randomKeys(t), []ratelimit.Policy{pol}, nil)
			s := randomSubject(t)
			req := ratelimit.Request{PolicyID: "r", SubjectDigest: s, Cost: 3, Deadline: time.Now().Add(30 * time.Second)}
			out := p.Evaluate(context.Background(), req)
			require.True(t, ratelimit.Admitted(out), "%v", out)
			d := out.(ratelimit.Evaluated).Decision
			require.False(t, d.Receipt.IsZero())
			assert.Equal(t, int64(3), d.Receipt.Cost())
			assert.Equal(t, int64(7), d.Remaining)

			back := p.Refund(context.Background(), ratelimit.Request{PolicyID: "r", SubjectDigest: s, Cost: 1, Deadline: time.Now().Add(30 * time.Second)}, d.Receipt)
			require.Equal(t, ratelimit.KindEvaluated, back.Kind(), "%v", back)
			rd := back.(ratelimit.Evaluated).Decision
			assert.Equal(t, int64(3), rd.Refunded, "the receipt's cost, not the request's")
			assert.Equal(t, int64(10), rd.Remaining)
			assert.True(t, rd.Receipt.IsZero(), "a refund is not an admission")

			next := p.Evaluate(context.Background(), req)
			require.True(t, ratelimit.Admitted(next))
			assert.Equal(t, int64(7), next.(ratelimit.Evaluated).Decision.Remaining, "as if the first admission had not been")
		})
	}
}

// TestRefundReceiptChecks: a zero receipt or one of another policy is
// invalid and sends nothing; another revision's or a local decision's
// receipt is a no-op that sends nothing; a refund lost after its write is
// Indeterminate and not retried.
func TestRefundReceiptChecks(t *testing.T) {
	f := &fakeCommander{respond: func(int, sentCommand) fakeReply { return fakeReply{err: io.EOF} }}
	p := fakeProvider(t, f, 4)
	s := randomSubject(t)
	req := ratelimit.Request{PolicyID: "fw", SubjectDigest: s, Cost: 1, Deadline: t0.Add(10 * testTimeout)}
	for name, tc := range map[string]struct {
		r    ratelimit.Receipt
		kind ratelimit.OutcomeKind
		cat  ratelimit.Category
	}{
		"zero":           {ratelimit.Receipt{}, ratelimit.KindUnavailable, ratelimit.CategoryInvalidRequest},
		"another policy": {ratelimit.NewReceipt("tb", 1, 1, t0.UnixMilli(), ratelimit.GlobalRedis), ratelimit.KindUnavailable, ratelimit.CategoryInvalidRequest},
		"old revision":   {ratelimit.NewReceipt("fw", 7, 1, t0.UnixMilli(), ratelimit.GlobalRedis), ratelimit.KindEvaluated, ""},
		"local decision": {ratelimit.NewReceipt("fw", 1, 1, t0.UnixMilli(), ratelimit.LocalEmergency), ratelimit.KindEvaluated, ""},
		"cost too large": {ratelimit.NewReceipt("fw", 1, 6, t0.UnixMilli(), ratelimit.GlobalRedis), ratelimit.KindUnavailable, ratelimit.CategoryInvalidRequest},
	} {
		t.Run(name, func(t *testing.T) {
			out := p.Refund(context.Background(), req, tc.r)
			require.Equal(t, tc.kind, out.Kind(), "%v", out)
			assert.Equal(t, tc.cat, ratelimit.CategoryOf(out))
			if tc.kind == ratelimit.KindEvaluated {
				assert.Zero(t, out.(ratelimit.Evaluated).Decision.Refunded)
			}
			assert.Empty(t, f.commands(), "nothing sent")
		})
	}
	out := p.Refund(context.Background(), req, ratelimit.NewReceipt("fw", 1, 1, t0.UnixMilli(), ratelimit.GlobalRedis))
	assert.Equal(t, ratelimit.KindIndeterminate, out.Kind(), "%v", out)
	assert.Len(t, f.commands(), 1, "sent once, never retried")
}

// TestServiceReceiptCarriesTheRequestCost: every path that admits builds
// the receipt with the request's cost, the units a refund gives back:
// Evaluate, EvaluateAfterCharge, an Evaluate with an evaluation ID (the
// dedup program) and each member of a policy set.
func TestServiceReceiptCarriesTheRequestCost(t *testing.T) {
	srv := redistest.Start(t)
	params := ratelimit.TokenBucket{Capacity: 100, RefillTokens: 1, RefillPeriod: time.Hour}
	plain := mustPolicy(t, ratelimit.PolicySpec{ID: "c", Params: params, MaxCost: 5})
	other := mustPolicy(t, ratelimit.PolicySpec{ID: "o", Params: params, MaxCost: 5})
	dd := mustPolicy(t, ratelimit.PolicySpec{ID: "d", Params: params, MaxCost: 5, FailurePolicy: ratelimit.FailClosed, DedupWindow: time.Minute})
	p := serviceProvider(t, srv, randomKeys(t), []ratelimit.Policy{plain, other, dd}, nil)
	ctx := context.Background()
	req := func(id ratelimit.PolicyID, cost int64) ratelimit.Request {
		return ratelimit.Request{PolicyID: id, SubjectDigest: randomSubject(t), Cost: cost, Deadline: time.Now().Add(30 * time.Second)}
	}
	receiptCost := func(t *testing.T, out ratelimit.Outcome) int64 {
		t.Helper()
		require.True(t, ratelimit.Admitted(out), "%v", out)
		r := out.(ratelimit.Evaluated).Decision.Receipt
		require.False(t, r.IsZero())
		return r.Cost()
	}
	for _, cost := range []int64{1, 4} {
		assert.Equal(t, cost, receiptCost(t, p.Evaluate(ctx, req("c", cost))), "Evaluate")
		out, charged := p.EvaluateAfterCharge(ctx, req("c", cost), 2)
		assert.True(t, charged)
		assert.Equal(t, cost, receiptCost(t, out), "EvaluateAfterCharge")
		r := req("d", cost)
		r.EvaluationID = ratelimit.EvaluationID(fmt.Sprintf("receipt-%d", cost))
		assert.Equal(t, cost, receiptCost(t, p.Evaluate(ctx, r)), "dedup program")
		set := p.EvaluateSet(ctx, ratelimit.SetRequest{Members: []ratelimit.PolicyID{"c", "o"}, SubjectDigest: randomSubject(t), Cost: cost, Deadline: time.Now().Add(30 * time.Second)})
		require.True(t, ratelimit.Admitted(set), "%v", set)
		members := set.(ratelimit.Evaluated).Members
		require.Len(t, members, 2)
		for i, m := range members {
			assert.Equal(t, cost, m.Receipt.Cost(), "set member %d", i)
		}
	}
}
