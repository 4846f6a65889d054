package edge

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// refundingPort is a fakePort whose refunds run,
// recording each refund's request and receipt.
type refundingPort struct {
	fakePort
	mu       sync.Mutex
	refunds  []ratelimit.Receipt
	deadline []bool // each refund's context had not ended
}

func (p *refundingPort) Refund(ctx context.Context, req ratelimit.Request, r ratelimit.Receipt) ratelimit.Outcome {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refunds = append(p.refunds, r)
	p.deadline = append(p.deadline, ctx.Err() == nil && !req.Deadline.IsZero())
	return ratelimit.Evaluated{Decision: ratelimit.Decision{Allowed: true, PolicyID: req.PolicyID, Refunded: r.Cost()}}
}

func delayed(delay time.Duration) ratelimit.Evaluated {
	return ratelimit.Evaluated{Decision: ratelimit.Decision{Allowed: true, Limit: 21, Remaining: 3, Delay: delay,
		ResetAt: time.Unix(1_800_000_002, 0), ServerNow: time.Unix(1_800_000_000, 0), PolicyID: "api", PolicyRevision: 1,
		Source: ratelimit.GlobalRedis, Certainty: ratelimit.Certain,
		Receipt: ratelimit.NewReceipt("api", 1, 1, 1_800_000_000_000, ratelimit.GlobalRedis)}}
}

// TestHeldUntilTheSlot: an admission with a delay (a leaky bucket's slot,
// ADR 0028) reaches the handler no sooner than the delay after the
// decision, with the delay in DelayHeader and DelayFrom; one without a
// delay goes at once, and a RateLimit-Delay the client sent never reaches
// the handler.
func TestHeldUntilTheSlot(t *testing.T) {
	for _, delay := range []time.Duration{0, 60 * time.Millisecond} {
		port := &refundingPort{fakePort: fakePort{out: delayed(delay)}}
		var obs []Observation
		cfg := baseConfig(t, port, time.Now())
		cfg.Observer = ObserverFunc(func(o Observation) { obs = append(obs, o) })
		m, err := New(cfg)
		require.NoError(t, err)
		var header string
		var fromCtx time.Duration
		var fromOK bool
		var reached time.Time
		h := m.Wrap(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
			reached, header = time.Now(), r.Header.Get("RateLimit-Delay")
			fromCtx, fromOK = DelayFrom(r.Context())
		}))
		req := httptest.NewRequest(http.MethodGet, "/x", nil)
		req.Header.Set("RateLimit-Delay", "0") // a client claiming it waited
		w := httptest.NewRecorder()
		start := time.Now()
		h.ServeHTTP(w, req)
		require.Equal(t, http.StatusOK, w.Code)
		require.False(t, reached.IsZero(), "the handler ran")
		require.Len(t, obs, 1)
		assert.True(t, obs[0].Admitted)
		assert.Equal(t, delay, obs[0].Delay)
		assert.Empty(t, port.refunds)
		if delay == 0 {
			assert.Empty(t, header, "the client's header is removed")
			assert.False(t, fromOK)
			continue
		}
		assert.GreaterOrEqual(t, reached.Sub(start), delay, "never before the slot")
		assert.Equal(t, "60", header)
		assert.Equal(t, "60", w.Header().Get("RateLimit-Delay"), "the client sees it too")
		assert.True(t, fromOK)
		assert.Equal(t, delay, fromCtx)
	}
}

// TestLeavingTheQueueGivesTheSlotBack: a request whose context ends while
// it is held is not passed on and its slot is refunded with the decision's
// receipt, on a context of the refund's own; a port that cannot refund
// leaves the charge (counted as not refunded).
func TestLeavingTheQueueGivesTheSlotBack(t *testing.T) {
	port := &refundingPort{fakePort: fakePort{out: delayed(time.Hour)}}
	var obs []Observation
	cfg := baseConfig(t, port, time.Now())
	cfg.Observer = ObserverFunc(func(o Observation) { obs = append(obs, o) })
	m, err := New(cfg)
	require.NoError(t, err)
	called := false
	h := m.Wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { called = true }))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/x", nil).WithContext(ctx))
	assert.False(t, called, "a request that left is not passed on")
	assert.Equal(t, http.StatusServiceUnavailable, w.Code)
	require.Len(t, port.refunds, 1)
	assert.Equal(t, delayed(0).Decision.Receipt, port.refunds[0])
	assert.True(t, port.deadline[0], "the refund runs on a live context with a deadline")
	require.Len(t, obs, 1)
	assert.True(t, obs[0].Abandoned)
	assert.True(t, obs[0].Refunded)
	assert.False(t, obs[0].Admitted)

	plain := &fakePort{out: delayed(time.Hour)}
	cfg = baseConfig(t, plain, time.Now())
	obs = nil
	cfg.Observer = ObserverFunc(func(o Observation) { obs = append(obs, o) })
	m, err = New(cfg)
	require.NoError(t, err)
	ctx2, cancel2 := context.WithCancel(context.Background())
	cancel2()
	m.Wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { called = true })).ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/x", nil).WithContext(ctx2))
	assert.False(t, called)
	require.Len(t, obs, 1)
	assert.True(t, obs[0].Abandoned)
	assert.False(t, obs[0].Refunded, "a refund that fails: the charge stays")
}

// TestQueueCannotBeASetMember: a route naming a leaky bucket and another
// policy is refused at New (ADR 0028).
func TestQueueCannotBeASetMember(t *testing.T) {
	cfg := baseConfig(t, &fakeSetPort{}, time.Now())
	q := mustPolicy(t, ratelimit.PolicySpec{ID: "q", Revision: 1, Algorithm: ratelimit.AlgorithmLeakyBucket,
		Params: ratelimit.LeakyBucket{Rate: 10, Period: time.Second, QueueSize: 5, MaxDelay: time.Second}, MaxCost: 1,
		CleanupGrace: time.Second, FailurePolicy: ratelimit.FailClosed})
	api := mustPolicy(t, ratelimit.PolicySpec{ID: "api", Revision: 1, Algorithm: ratelimit.AlgorithmFixedWindow,
		Params: ratelimit.FixedWindow{Limit: 5, Window: time.Second}, MaxCost: 1, CleanupGrace: time.Second, FailurePolicy: ratelimit.FailClosed})
	cfg.Policies = []ratelimit.Policy{q, api}
	cfg.Routes = []Route{{Pattern: "/x", Policy: "api"}, {Pattern: "/x", Policy: "q"}}
	_, err := New(cfg)
	require.ErrorIs(t, err, ErrInvalidConfig)
	assert.Contains(t, err.Error(), "leaky bucket")
}
