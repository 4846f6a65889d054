package ratelimit_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit/ratelimittest"
)

// TestRefundDetachedOutlivesTheRequest: the refund runs after the
// caller's context was cancelled, keeps its values, and is bounded by the
// timeout, both on its context and in the request's Deadline.
func TestRefundDetachedOutlivesTheRequest(t *testing.T) {
	type ctxKey struct{}
	parent, cancel := context.WithCancel(context.WithValue(context.Background(), ctxKey{}, "v"))
	cancel()
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	var got ratelimit.Request
	var gotCtx context.Context
	var errAtRefund error
	f := ratelimittest.NewFake()
	f.RefundFunc = func(ctx context.Context, req ratelimit.Request, _ ratelimit.Receipt) ratelimit.Outcome {
		got, gotCtx, errAtRefund = req, ctx, ctx.Err()
		return ratelimit.Evaluated{Decision: ratelimit.Decision{Allowed: true, Refunded: 2}}
	}
	r := ratelimit.NewReceipt("api", 1, 2, now.UnixMilli(), ratelimit.GlobalRedis)
	out := ratelimit.RefundDetached(parent, f, ratelimit.Request{PolicyID: "api", SubjectDigest: "s", Cost: 1}, r, now, 250*time.Millisecond)

	ev, ok := out.(ratelimit.Evaluated)
	require.True(t, ok, "outcome %T", out)
	assert.Equal(t, int64(2), ev.Decision.Refunded)
	require.NotNil(t, gotCtx)
	assert.Equal(t, "v", gotCtx.Value(ctxKey{}), "the caller's values are kept")
	assert.NoError(t, errAtRefund, "the caller's cancellation is not inherited")
	deadline, has := gotCtx.Deadline()
	require.True(t, has, "the refund's context is bounded")
	assert.WithinDuration(t, time.Now().Add(250*time.Millisecond), deadline, 250*time.Millisecond)
	assert.Equal(t, now.Add(250*time.Millisecond), got.Deadline)
	assert.Equal(t, ratelimit.PolicyID("api"), got.PolicyID)
	assert.Equal(t, ratelimit.SubjectDigest("s"), got.SubjectDigest)
}
