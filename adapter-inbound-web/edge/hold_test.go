package edge

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// slotPolicy is a concurrency limit of 3 slots held at most 2 s.
func slotPolicy(t *testing.T, id ratelimit.PolicyID) ratelimit.Policy {
	return mustPolicy(t, ratelimit.PolicySpec{ID: id, Revision: 1, Algorithm: ratelimit.AlgorithmConcurrency,
		Params: ratelimit.Concurrency{Limit: 3, MaxHold: 2 * time.Second}, MaxCost: 1, CleanupGrace: time.Second,
		FailurePolicy: ratelimit.FailClosed})
}

// holding is one admission of policy id holding its slot, with a receipt.
func holding(id ratelimit.PolicyID, at int64) ratelimit.Decision {
	return ratelimit.Decision{Allowed: true, Limit: 3, Remaining: 2, ResetAt: time.UnixMilli(at + 2000), ServerNow: time.UnixMilli(at),
		PolicyID: id, PolicyRevision: 1, Source: ratelimit.GlobalRedis, Certainty: ratelimit.Certain,
		Receipt: ratelimit.NewReceipt(id, 1, 1, at, ratelimit.GlobalRedis)}
}

// TestSlotGivenBackWhateverWayTheHandlerEnds: a concurrency limit's slot
// (ADR 0041) is given back with its receipt once the handler returns:
// normally, by a panic (which still reaches the caller), and after the
// client left; the release runs on a live context with a deadline. The
// handler's context ends at maxHold from the decision's sending (its
// whole millisecond, ratelimit.HoldEnd); the
// fields say the quota is in flight and have no window.
func TestSlotGivenBackWhateverWayTheHandlerEnds(t *testing.T) {
	for _, ending := range []string{"return", "panic", "client gone"} {
		t.Run(ending, func(t *testing.T) {
			now := time.Now()
			port := &refundingPort{fakePort: fakePort{out: ratelimit.Evaluated{Decision: holding("api", 1_800_000_000_000)}}}
			cfg := baseConfig(t, port, now)
			cfg.Policies = []ratelimit.Policy{slotPolicy(t, "api")}
			m, err := New(cfg)
			require.NoError(t, err)
			var deadline time.Time
			var hasDeadline bool
			h := m.Wrap(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
				deadline, hasDeadline = r.Context().Deadline()
				assert.Empty(t, port.refunds, "the slot is held while the handler runs")
				if ending == "panic" {
					panic("handler failed")
				}
			}))
			ctx, cancel := context.WithCancel(context.Background())
			if ending == "client gone" {
				cancel()
			}
			defer cancel()
			req := httptest.NewRequest(http.MethodGet, "/x", nil).WithContext(ctx)
			w := httptest.NewRecorder()
			if ending == "panic" {
				require.PanicsWithValue(t, "handler failed", func() { h.ServeHTTP(w, req) })
			} else {
				h.ServeHTTP(w, req)
			}
			require.True(t, hasDeadline)
			assert.Equal(t, now.Truncate(time.Millisecond).Add(2*time.Second), deadline, "the handler's context ends at maxHold from the decision's sending millisecond")
			require.Len(t, port.refunds, 1, "given back once")
			assert.Equal(t, holding("api", 1_800_000_000_000).Receipt, port.refunds[0])
			assert.True(t, port.deadline[0], "released on a live context with a deadline")
			assert.Equal(t, `"api";q=3;qu="concurrent-requests"`, w.Header().Get("RateLimit-Policy"))
		})
	}
}

// TestRateLimitNotGivenBack: a rate limit's admission is never given back
// when the handler returns, and its handler's context has no new deadline.
func TestRateLimitNotGivenBack(t *testing.T) {
	port := &refundingPort{fakePort: fakePort{out: ratelimit.Evaluated{Decision: holding("api", 1_800_000_000_000)}}}
	cfg := baseConfig(t, port, time.Now())
	cfg.Policies = []ratelimit.Policy{mustPolicy(t, ratelimit.PolicySpec{ID: "api", Revision: 1, Algorithm: ratelimit.AlgorithmFixedWindow,
		Params: ratelimit.FixedWindow{Limit: 3, Window: time.Second}, MaxCost: 1, CleanupGrace: time.Second, FailurePolicy: ratelimit.FailClosed})}
	m, err := New(cfg)
	require.NoError(t, err)
	var hasDeadline bool
	h := m.Wrap(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { _, hasDeadline = r.Context().Deadline() }))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/x", nil))
	assert.Equal(t, http.StatusOK, w.Code)
	assert.False(t, hasDeadline)
	assert.Empty(t, port.refunds)
}

// setRefundingPort answers every set with its members' decisions and
// records refunds.
type setRefundingPort struct {
	refundingPort
	members []ratelimit.Decision
}

func (p *setRefundingPort) EvaluateSet(context.Context, ratelimit.SetRequest) ratelimit.Outcome {
	return ratelimit.Evaluated{Decision: p.members[0], Members: p.members}
}

// TestSetGivesBackOnlyItsSlots: a route mapped to a rate limit and a
// concurrency limit (a set: the budget and a slot, all or nothing) gives
// back the slot only, when the handler returns; RateLimit-Policy lists
// both, the slot's as concurrent requests.
func TestSetGivesBackOnlyItsSlots(t *testing.T) {
	rate := mustPolicy(t, ratelimit.PolicySpec{ID: "api", Revision: 1, Algorithm: ratelimit.AlgorithmFixedWindow,
		Params: ratelimit.FixedWindow{Limit: 10, Window: time.Minute}, MaxCost: 1, CleanupGrace: time.Second, FailurePolicy: ratelimit.FailClosed})
	port := &setRefundingPort{members: []ratelimit.Decision{holding("api", 1_800_000_000_000), holding("inflight", 1_800_000_000_001)}}
	cfg := baseConfig(t, port, time.Now())
	cfg.Policies = []ratelimit.Policy{rate, slotPolicy(t, "inflight")}
	cfg.Routes = []Route{{Pattern: "/x", Policy: "api"}, {Pattern: "/x", Policy: "inflight"}}
	m, err := New(cfg)
	require.NoError(t, err)
	h := m.Wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/x", nil))
	assert.Equal(t, http.StatusOK, w.Code)
	require.Len(t, port.refunds, 1)
	assert.Equal(t, port.members[1].Receipt, port.refunds[0], "the slot, not the rate budget")
	assert.Equal(t, `"api";q=10;w=60, "inflight";q=3;qu="concurrent-requests"`, w.Header().Get("RateLimit-Policy"))
}
