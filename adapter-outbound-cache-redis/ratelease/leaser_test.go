package ratelease

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/internal/changetest"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit/ratelimittest"
)

// TestHotSubjectIsAnsweredLocally: a hot subject's requests are answered
// from leases after the first few, so the port below decides a small part
// of them; every admission is one the window allows, no more than its
// limit; and Close gives the unspent units back, so the server's count is
// exactly what was admitted.
func TestHotSubjectIsAnsweredLocally(t *testing.T) {
	srv := redistest.Start(t)
	keys := redistest.RandomKeys(t)
	p := leasedPolicy(t, ratelimit.FixedWindow{Limit: 500, Window: time.Hour}, 0.1, 2*time.Second)
	pols := []ratelimit.Policy{p}
	inner := &counting{EdgePort: provider(t, srv, keys, pols)}
	l, err := New(inner, Options{Policies: pols, Timeout: time.Second})
	require.NoError(t, err)
	s := changetest.RandomSubject(t)
	ctx := context.Background()
	var n int
	for range 300 {
		if admitted(l.Evaluate(ctx, request(p, s))) {
			n++
		}
	}
	assert.Equal(t, 300, n, "under the limit every request is admitted")
	calls := inner.calls.Load()
	t.Logf("300 requests, %d decisions below", calls)
	assert.Less(t, calls, int64(40), "most requests are answered from leases")
	l.Close()

	// A fresh instance without leases sees what was admitted, no more.
	fresh := provider(t, srv, keys, pols)
	out := fresh.Evaluate(ctx, request(p, s))
	require.True(t, admitted(out))
	assert.Equal(t, int64(500-300-1), out.(ratelimit.Evaluated).Decision.Remaining, "unspent units were given back at Close")
}

// TestLimitHoldsUnderConcurrency: many goroutines on one leased subject
// never get more than the limit admitted in a window that does not end
// during the test.
func TestLimitHoldsUnderConcurrency(t *testing.T) {
	srv := redistest.Start(t)
	keys := redistest.RandomKeys(t)
	p := leasedPolicy(t, ratelimit.FixedWindow{Limit: 400, Window: time.Hour}, 0.2, time.Second)
	pols := []ratelimit.Policy{p}
	s := changetest.RandomSubject(t)
	var total atomicCount
	run(t, 3, 8, 120, func(inst int, l *Leaser) {
		if admitted(l.Evaluate(context.Background(), request(p, s))) {
			total.add(1)
		}
	}, func() *Leaser { return newLeaser(t, provider(t, srv, keys, pols), pols) })
	assert.Equal(t, int64(400), total.load(), "3 instances x 8 workers x 120 requests: exactly the limit admitted")
}

// TestPassThrough: a request with an evaluation ID, a policy without a
// lease and a subject beyond the table are decided below, one by one.
func TestPassThrough(t *testing.T) {
	srv := redistest.Start(t)
	keys := redistest.RandomKeys(t)
	leased := leasedPolicy(t, ratelimit.FixedWindow{Limit: 1000, Window: time.Hour}, 0.5, time.Second)
	plain, err := ratelimit.NewPolicy(ratelimit.PolicySpec{ID: "plain", Revision: 1, Algorithm: ratelimit.AlgorithmFixedWindow,
		Params: ratelimit.FixedWindow{Limit: 1000, Window: time.Hour}, MaxCost: 1, CleanupGrace: time.Minute, FailurePolicy: ratelimit.FailClosed})
	require.NoError(t, err)
	pols := []ratelimit.Policy{leased, plain}
	inner := &counting{EdgePort: provider(t, srv, keys, pols)}
	l, err := New(inner, Options{Policies: pols, Timeout: time.Second, MaxSubjects: 1})
	require.NoError(t, err)
	t.Cleanup(l.Close)
	ctx := context.Background()
	s := changetest.RandomSubject(t)
	for range 20 {
		require.True(t, admitted(l.Evaluate(ctx, request(plain, s))))
	}
	assert.Equal(t, int64(20), inner.calls.Load(), "no lease without one in the policy")
	require.True(t, admitted(l.Evaluate(ctx, request(leased, s)))) // takes the table's one entry
	other := changetest.RandomSubject(t)
	before := inner.calls.Load()
	for range 20 {
		require.True(t, admitted(l.Evaluate(ctx, request(leased, other))))
	}
	assert.Equal(t, before+20, inner.calls.Load(), "a subject beyond MaxSubjects is decided below")
}

// TestNewRefusesBadOptions names the option at fault.
func TestNewRefusesBadOptions(t *testing.T) {
	_, err := New(nil, Options{Timeout: time.Second})
	assert.ErrorIs(t, err, ErrInvalidOptions)
	_, err = New(&counting{}, Options{})
	assert.ErrorContains(t, err, "Timeout")
	_, err = New(&counting{}, Options{Timeout: time.Second, MaxSubjects: -1})
	assert.ErrorContains(t, err, "MaxSubjects")
}

// slowDenier denies every request after a pause, counting the calls in
// flight at once.
type slowDenier struct {
	ratelimit.EdgePort
	now, peak atomic.Int64
}

func (d *slowDenier) Evaluate(_ context.Context, req ratelimit.Request) ratelimit.Outcome {
	n := d.now.Add(1)
	defer d.now.Add(-1)
	for {
		peak := d.peak.Load()
		if n <= peak || d.peak.CompareAndSwap(peak, n) {
			break
		}
	}
	time.Sleep(20 * time.Millisecond)
	return ratelimit.Evaluated{Decision: ratelimit.Decision{PolicyID: req.PolicyID, PolicyRevision: 1, Limit: 10, Remaining: 0,
		RetryAfter: time.Second, Source: ratelimit.GlobalRedis, Certainty: ratelimit.Certain}}
}

// TestSpentBudgetIsNotQueued: a subject whose budget is spent gets no
// lease, and its concurrent requests go below together, not one after the
// other behind the subject's lease (what make bench-lease's nearly-spent
// run found).
func TestSpentBudgetIsNotQueued(t *testing.T) {
	p := leasedPolicy(t, ratelimit.FixedWindow{Limit: 10, Window: time.Hour}, 0.5, time.Second)
	d := &slowDenier{}
	l := newLeaser(t, d, []ratelimit.Policy{p})
	s := changetest.RandomSubject(t)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 3 {
				assert.False(t, admitted(l.Evaluate(context.Background(), request(p, s))))
			}
		}()
	}
	wg.Wait()
	assert.Greater(t, d.peak.Load(), int64(1), "the subject's requests were decided one at a time")
}

// TestReservationWithoutServerInstantIsTheRequestsAlone: a reservation
// answered without the server's instant (nothing to end a lease by) gives
// its other units back at once, and the caller's receipt is for its own
// cost, so a later refund of it cannot give back more than it took.
func TestReservationWithoutServerInstantIsTheRequestsAlone(t *testing.T) {
	p := leasedPolicy(t, ratelimit.FixedWindow{Limit: 1000, Window: time.Hour}, 0.5, time.Second)
	var mu sync.Mutex
	var reserved, returned []int64
	f := ratelimittest.NewFake(p)
	f.Func = func(_ context.Context, req ratelimit.Request) ratelimit.Outcome {
		if req.Lease {
			mu.Lock()
			reserved = append(reserved, req.Cost)
			mu.Unlock()
		}
		r := ratelimit.NewReceipt(p.ID(), p.Revision(), req.Cost, time.Now().UnixMilli(), ratelimit.GlobalRedis)
		return ratelimit.Evaluated{Decision: ratelimit.Decision{Allowed: true, Limit: 1000, Remaining: 900, PolicyID: p.ID(),
			PolicyRevision: p.Revision(), Source: ratelimit.GlobalRedis, Receipt: r}}
	}
	f.RefundFunc = func(_ context.Context, _ ratelimit.Request, r ratelimit.Receipt) ratelimit.Outcome {
		mu.Lock()
		returned = append(returned, r.Cost())
		mu.Unlock()
		return ratelimit.Evaluated{Decision: ratelimit.Decision{Allowed: true, Refunded: r.Cost()}}
	}
	l := newLeaser(t, f, []ratelimit.Policy{p})
	s := changetest.RandomSubject(t)
	for range 40 {
		out := l.Evaluate(context.Background(), request(p, s))
		ev, ok := out.(ratelimit.Evaluated)
		require.True(t, ok, "outcome %T", out)
		require.True(t, ev.Decision.Allowed)
		assert.Equal(t, int64(1), ev.Decision.Receipt.Cost(), "the caller's receipt is its own cost")
	}
	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, reserved, "a hot subject asks for reservations")
	want := make([]int64, 0, len(reserved))
	for _, k := range reserved {
		want = append(want, k-1)
	}
	assert.Equal(t, want, returned, "every reservation's other units go back at once")
}

// TestRequestsDoNotWaitForAReservation: while a subject's reservation is
// in flight, its other requests pass on below at once rather than queue
// behind it (no request waits longer than its own round trip), and the
// reservation, once answered, serves the requests after it.
func TestRequestsDoNotWaitForAReservation(t *testing.T) {
	p := leasedPolicy(t, ratelimit.FixedWindow{Limit: 1000, Window: time.Hour}, 0.5, time.Second)
	reserving, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	var passed atomic.Int64
	f := ratelimittest.NewFake(p)
	f.Func = func(_ context.Context, req ratelimit.Request) ratelimit.Outcome {
		if req.Lease {
			once.Do(func() { close(reserving) })
			<-release
		} else {
			passed.Add(1)
		}
		r := ratelimit.NewReceipt(p.ID(), p.Revision(), req.Cost, time.Now().UnixMilli(), ratelimit.GlobalRedis)
		return ratelimit.Evaluated{Decision: ratelimit.Decision{Allowed: true, Limit: 1000, Remaining: 900, PolicyID: p.ID(),
			PolicyRevision: p.Revision(), Source: ratelimit.GlobalRedis, Receipt: r, ServerNow: time.Now()}}
	}
	l := newLeaser(t, f, []ratelimit.Policy{p})
	s := changetest.RandomSubject(t)
	ctx := context.Background()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 100; i++ {
			select {
			case <-reserving:
				return
			default:
			}
			l.Evaluate(ctx, request(p, s))
		}
	}()
	select {
	case <-reserving:
	case <-time.After(5 * time.Second):
		close(release)
		t.Fatal("no reservation after a run of requests")
	}
	before := passed.Load()
	answered := make(chan ratelimit.Outcome, 1)
	go func() { answered <- l.Evaluate(ctx, request(p, s)) }()
	select {
	case out := <-answered:
		assert.True(t, admitted(out))
		assert.Equal(t, before+1, passed.Load(), "decided below while the reservation was out")
	case <-time.After(5 * time.Second):
		t.Error("a request waited for another's reservation")
	}
	close(release)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the reservation did not return")
	}
	before = passed.Load()
	require.True(t, admitted(l.Evaluate(ctx, request(p, s))))
	assert.Equal(t, before, passed.Load(), "answered from the lease once it arrived")
}
