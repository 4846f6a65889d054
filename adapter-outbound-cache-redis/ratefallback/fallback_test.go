package ratefallback_test

import (
	"context"
	"sync"
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

// TestConformance runs the EdgePort conformance kit against the fallback
// over a healthy real server, the kit's policies turned local-fallback:
// while Redis answers, the decorator decides as the provider does.
func TestConformance(t *testing.T) {
	srv := redistest.Start(t)
	keys := randomKeys(t)
	ratelimittest.Run(t, func(t *testing.T, policies []ratelimit.Policy) ratelimit.EdgePort {
		local := asLocalFallback(t, policies)
		return fallback(t, provider(t, srv, keys, local, 3), local, nil)
	})
}

// TestConformanceSets runs the set suite (RunSets) through the fallback (Redis
// up: the provider decides the sets, ADR 0027).
func TestConformanceSets(t *testing.T) {
	srv := redistest.Start(t)
	keys := randomKeys(t)
	ratelimittest.RunSets(t, func(t *testing.T, policies []ratelimit.Policy) ratelimit.EdgePort {
		local := asLocalFallback(t, policies)
		return fallback(t, provider(t, srv, keys, local, 3), local, nil)
	})
}

// asLocalFallback is policies as local-fallback policies for 2 instances.
func asLocalFallback(t *testing.T, policies []ratelimit.Policy) []ratelimit.Policy {
	local := make([]ratelimit.Policy, 0, len(policies))
	for _, p := range policies {
		lp, err := ratelimit.NewPolicy(ratelimit.PolicySpec{
			ID: p.ID(), Revision: p.Revision(), Algorithm: p.Algorithm(), Params: p.Params(), MaxCost: p.MaxCost(),
			CleanupGrace: p.CleanupGrace(), MaxClockRegression: p.MaxClockRegression(), DedupWindow: p.DedupWindow(),
			FailurePolicy: ratelimit.LocalFallback, FallbackInstances: 2,
		})
		require.NoError(t, err)
		local = append(local, lp)
	}
	return local
}

// unstarted is a provider for pols that New accepts (New does no I/O).
func unstarted(t *testing.T, pols ...ratelimit.Policy) *redisrate.Provider {
	client, err := redisrate.NewClient(redisrate.ClientConfig{Addr: "127.0.0.1:1", Protocol: redisrate.ProtocolRESP2,
		CommandTimeout: redisrate.DefaultCommandTimeout, DialTimeout: redisrate.DefaultDialTimeout, PoolSize: 1, PoolTimeout: redisrate.DefaultCommandTimeout})
	require.NoError(t, err)
	p, err := redisrate.New(client, randomKeys(t), pols, redisrate.Options{CommandTimeout: redisrate.DefaultCommandTimeout, MaxInFlight: 1})
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func TestNewRejectsBadOptions(t *testing.T) {
	lf := localPolicy(t, "lf", ratelimit.FixedWindow{Limit: 10, Window: time.Hour}, 1, 2)
	for _, tt := range []struct {
		name string
		opts ratefallback.Options
		want string
	}{
		{"no policies", ratefallback.Options{CommandTimeout: time.Second}, "Options.Policies"},
		{"no command timeout", ratefallback.Options{Policies: []ratelimit.Policy{lf}}, "Options.CommandTimeout"},
		{"table too large", ratefallback.Options{Policies: []ratelimit.Policy{lf}, CommandTimeout: time.Second, MaxSubjects: ratefallback.MaxSubjects + 1}, "Options.MaxSubjects"},
		{"negative table", ratefallback.Options{Policies: []ratelimit.Policy{lf}, CommandTimeout: time.Second, MaxSubjects: -1}, "Options.MaxSubjects"},
		{"pass too often", ratefallback.Options{Policies: []ratelimit.Policy{lf}, CommandTimeout: time.Second, ReconcileEvery: time.Millisecond}, "Options.ReconcileEvery"},
		{"zero policy", ratefallback.Options{Policies: []ratelimit.Policy{{}}, CommandTimeout: time.Second}, "zero policy"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			fb, err := ratefallback.New(unstarted(t, lf), tt.opts)
			require.Error(t, err)
			assert.Nil(t, fb)
			assert.ErrorIs(t, err, ratefallback.ErrInvalidOptions)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
	_, err := ratefallback.New(nil, ratefallback.Options{Policies: []ratelimit.Policy{lf}, CommandTimeout: time.Second})
	assert.ErrorIs(t, err, ratefallback.ErrInvalidOptions)
}

// TestLocalDecisionsChargedAfterRecovery: with Redis down (killed, no
// breaker: every call Unavailable{connection}), a local-fallback policy is
// decided on the share (5 of 10), a fail-closed one and a cost above the
// share keep their Unavailable; a charge while Redis is down fails and
// stays pending (counted); once Redis is back the charge carries the 5
// local admissions and the other instance's share 5, so the next global
// decision is a denial.
func TestLocalDecisionsChargedAfterRecovery(t *testing.T) {
	for _, params := range []ratelimit.Params{
		ratelimit.FixedWindow{Limit: 10, Window: time.Hour},
		// GCRA (ADR 0021): burst 10, so the share is 5; one per hour
		// refills nothing during the test.
		ratelimit.GCRA{Rate: 1, Period: time.Hour, Burst: 10},
		// The sliding log (ADR 0024): limit 10, so the share is 5.
		ratelimit.SlidingLog{Limit: 10, Window: time.Hour},
	} {
		t.Run(params.Algorithm().String(), func(t *testing.T) { localDecisionsChargedAfterRecovery(t, params) })
	}
}

func localDecisionsChargedAfterRecovery(t *testing.T, params ratelimit.Params) {
	srv := redistest.Start(t)
	keys := randomKeys(t)
	lf := localPolicy(t, "lf", params, 10, 2)
	fc := localPolicy(t, "fc", ratelimit.FixedWindow{Limit: 10, Window: time.Hour}, 1, 0)
	pols := []ratelimit.Policy{lf, fc}
	ratelimittest.ClearOfWindowEnd(t, time.Hour, time.Minute)
	fb := fallback(t, provider(t, srv, keys, pols, 0), pols, func(o *ratefallback.Options) { o.ReconcileEvery = time.Minute })
	s := randomSubject(t)
	srv.Kill()

	admitted := 0
	for i := range 7 {
		out := ask(fb, lf.ID(), s, 1)
		ev, ok := out.(ratelimit.Evaluated)
		require.True(t, ok, "call %d: %v", i, out)
		assert.Equal(t, ratelimit.LocalEmergency, ev.Decision.Source)
		assert.Equal(t, ratelimit.ApproximateLocal, ev.Decision.Certainty)
		assert.Equal(t, int64(5), ev.Decision.Limit, "the share")
		if ev.Decision.Allowed {
			admitted++
		}
	}
	assert.Equal(t, 5, admitted)
	out := ask(fb, lf.ID(), randomSubject(t), 6)
	assert.Equal(t, ratelimit.CategoryConnection, ratelimit.CategoryOf(out), "a cost above the share: %v", out)
	out = ask(fb, fc.ID(), s, 1)
	assert.Equal(t, ratelimit.CategoryConnection, ratelimit.CategoryOf(out), "fail-closed passes through: %v", out)

	charged, failed := fb.Reconcile(context.Background())
	assert.Zero(t, charged)
	assert.Equal(t, 1, failed)
	st := fb.Stats()
	assert.Equal(t, map[ratelimit.PolicyID]int64{"lf": 5}, st.Pending)
	assert.Equal(t, uint64(1), st.ChargeFailures)
	assert.Equal(t, 1, st.Subjects)

	srv.Restart()
	// go-redis itself dials again up to a second after PoolSize failed
	// dials in a row (docs/failure-certainty.md): until then the subject
	// is decided locally (its share is used up: denials).
	var d ratelimit.Decision
	for stop := time.Now().Add(5 * time.Second); d.Source != ratelimit.GlobalRedis; {
		require.True(t, time.Now().Before(stop), "no global decision: %v", out)
		out = ask(fb, lf.ID(), s, 1)
		require.Equal(t, ratelimit.KindEvaluated, out.Kind(), "%v", out)
		d = out.(ratelimit.Evaluated).Decision
		require.False(t, d.Allowed, "%v", out)
		time.Sleep(20 * time.Millisecond)
	}
	assert.False(t, d.Allowed, "5 local + 5 reserved: the limit is used up")
	assert.Equal(t, map[ratelimit.PolicyID]int64{"lf": 0}, fb.Stats().Pending, "charged with that decision")
	charged, failed = fb.Reconcile(context.Background())
	assert.Zero(t, charged+int64(failed), "nothing left")
}

// TestTableFullAndSweep: a full table of live entries refuses a new
// subject (its Unavailable stands, with ErrTableFull); once their window
// has passed the entries are swept with what they owed (counted as
// dropped) and the new subject is decided.
func TestTableFullAndSweep(t *testing.T) {
	srv := redistest.Start(t)
	keys := randomKeys(t)
	lf := localPolicy(t, "lf", ratelimit.FixedWindow{Limit: 10, Window: time.Minute}, 1, 2)
	pols := []ratelimit.Policy{lf}
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	fb := fallback(t, provider(t, srv, keys, pols, 0), pols, func(o *ratefallback.Options) {
		o.MaxSubjects, o.Now, o.ReconcileEvery = 2, clock, time.Minute
	})
	srv.Kill()
	for range 2 {
		require.True(t, ratelimit.Admitted(ask(fb, lf.ID(), randomSubject(t), 1)))
	}
	out := ask(fb, lf.ID(), randomSubject(t), 1)
	require.Equal(t, ratelimit.CategoryConnection, ratelimit.CategoryOf(out), "%v", out)
	assert.ErrorIs(t, out.(ratelimit.Unavailable).Cause, ratefallback.ErrTableFull)

	mu.Lock()
	now = now.Add(time.Hour)
	mu.Unlock()
	out = ask(fb, lf.ID(), randomSubject(t), 1)
	require.True(t, ratelimit.Admitted(out), "%v", out)
	st := fb.Stats()
	assert.Equal(t, uint64(2), st.Dropped, "the swept entries' uncharged admissions")
	assert.Equal(t, 1, st.Subjects)
	assert.Equal(t, 2, st.MaxSubjects)
}

func TestSharePolicy(t *testing.T) {
	for _, tt := range []struct {
		params ratelimit.Params
		n      int64
		want   ratelimit.Params
	}{
		{ratelimit.FixedWindow{Limit: 10, Window: time.Minute}, 2, ratelimit.FixedWindow{Limit: 5, Window: time.Minute}},
		{ratelimit.SlidingWindowCounter{Limit: 7, Window: time.Minute}, 3, ratelimit.SlidingWindowCounter{Limit: 2, Window: time.Minute}},
		{ratelimit.FixedWindow{Limit: 2, Window: time.Minute}, 5, ratelimit.FixedWindow{Limit: 1, Window: time.Minute}},
		{ratelimit.TokenBucket{Capacity: 10, RefillTokens: 1, RefillPeriod: time.Second}, 2, ratelimit.TokenBucket{Capacity: 5, RefillTokens: 1, RefillPeriod: 2 * time.Second}},
		{ratelimit.GCRA{Rate: 10, Period: time.Second, Burst: 20}, 4, ratelimit.GCRA{Rate: 10, Period: 4 * time.Second, Burst: 5}},
		{ratelimit.SlidingLog{Limit: 100, Window: time.Minute}, 3, ratelimit.SlidingLog{Limit: 33, Window: time.Minute}},
		// A queue (ADR 0028): the rate / n, a queue of share-1, never
		// more delay-free waiters than that, MaxDelay kept (it still holds:
		// the local longest delay is at most the global one).
		{ratelimit.LeakyBucket{Rate: 10, Period: time.Second, QueueSize: 20, MaxDelay: 2 * time.Second}, 2,
			ratelimit.LeakyBucket{Rate: 10, Period: 2 * time.Second, QueueSize: 9, MaxDelay: 2 * time.Second}},
		{ratelimit.LeakyBucket{Rate: 10, Period: time.Second, QueueSize: 20, DelayAfter: 8, MaxDelay: 1200 * time.Millisecond}, 3,
			ratelimit.LeakyBucket{Rate: 10, Period: 3 * time.Second, QueueSize: 6, DelayAfter: 6, MaxDelay: 1200 * time.Millisecond}},
		{ratelimit.LeakyBucket{Rate: 10, Period: time.Second, QueueSize: 20, DelayAfter: 2, MaxDelay: 1800 * time.Millisecond}, 4,
			ratelimit.LeakyBucket{Rate: 10, Period: 4 * time.Second, QueueSize: 4, DelayAfter: 2, MaxDelay: 1800 * time.Millisecond}},
		// Period * instances beyond time.Duration: the rate is divided.
		{ratelimit.GCRA{Rate: 100, Period: 100_000 * time.Hour, Burst: 20}, 1 << 20, ratelimit.GCRA{Rate: 1, Period: 100_000 * time.Hour, Burst: 1}},
	} {
		sp, err := ratefallback.SharePolicy(localPolicy(t, "lf", tt.params, 1, tt.n))
		require.NoError(t, err)
		assert.Equal(t, tt.want, sp.Params())
		assert.Equal(t, ratelimit.FailClosed, sp.FailurePolicy())
	}
	_, err := ratefallback.SharePolicy(localPolicy(t, "fc", ratelimit.FixedWindow{Limit: 5, Window: time.Minute}, 1, 0))
	assert.Error(t, err)
}

// TestConcurrentRequestsWaitForTheCharge: after recovery, 16 requests of a
// subject with pending local admissions arrive at once on one instance;
// one carries the charge (5 local + 5 reserved = the limit) and the others
// wait for it, so none is decided ahead of it: not one is admitted (some
// may meet the provider's in-flight bound of 8: refused unsent).
func TestConcurrentRequestsWaitForTheCharge(t *testing.T) {
	srv := redistest.Start(t)
	keys := randomKeys(t)
	lf := localPolicy(t, "lf", ratelimit.FixedWindow{Limit: 10, Window: time.Hour}, 1, 2)
	pols := []ratelimit.Policy{lf}
	ratelimittest.ClearOfWindowEnd(t, time.Hour, time.Minute)
	p := provider(t, srv, keys, pols, 0)
	fb := fallback(t, p, pols, func(o *ratefallback.Options) { o.ReconcileEvery = time.Minute })
	s := randomSubject(t)
	srv.Kill()
	for range 5 {
		require.True(t, ratelimit.Admitted(ask(fb, lf.ID(), s, 1)))
	}
	srv.Restart()
	// Ready goes to the server directly (not through the fallback); once
	// it passes, go-redis dials again.
	for stop := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := p.Ready(ctx)
		cancel()
		if err == nil {
			break
		}
		require.True(t, time.Now().Before(stop), "not ready: %v", err)
	}
	var wg sync.WaitGroup
	start := make(chan struct{})
	outs := make([]ratelimit.Outcome, 16)
	for i := range outs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			outs[i] = ask(fb, lf.ID(), s, 1)
		}()
	}
	close(start)
	wg.Wait()
	global, refused := 0, 0
	for i, out := range outs {
		if ratelimit.CategoryOf(out) == ratelimit.CategoryAdmission {
			refused++ // the provider's in-flight bound (8) refused it, unsent
			continue
		}
		require.Equal(t, ratelimit.KindEvaluated, out.Kind(), "request %d: %v", i, out)
		d := out.(ratelimit.Evaluated).Decision
		assert.False(t, d.Allowed, "request %d admitted (%s)", i, d.Source)
		if d.Source == ratelimit.GlobalRedis {
			global++
		}
	}
	assert.Positive(t, global)
	// A refusal means the bound's 8 slots were held, at least 7 of them by
	// these requests (the background pass may hold one): the others were
	// decided.
	assert.LessOrEqual(t, refused, len(outs)-7, "refused by the in-flight bound")
	assert.Equal(t, map[ratelimit.PolicyID]int64{"lf": 0}, fb.Stats().Pending)
}

// TestGlobalPolicyFallsBackOnOneShare: a global local-fallback policy is
// one local entry for every subject (ADR 0027): while Redis is down, its
// share is spent by all clients together.
func TestGlobalPolicyFallsBackOnOneShare(t *testing.T) {
	srv := redistest.Start(t)
	spec := ratelimit.PolicySpec{ID: "backend", Revision: 1, Algorithm: ratelimit.AlgorithmFixedWindow,
		Params: ratelimit.FixedWindow{Limit: 10, Window: time.Hour}, MaxCost: 1, CleanupGrace: time.Minute,
		MaxClockRegression: 2 * time.Second, FailurePolicy: ratelimit.LocalFallback, FallbackInstances: 2, Scope: ratelimit.ScopeGlobal}
	g, err := ratelimit.NewPolicy(spec)
	require.NoError(t, err)
	pols := []ratelimit.Policy{g}
	ratelimittest.ClearOfWindowEnd(t, time.Hour, time.Minute)
	fb := fallback(t, provider(t, srv, randomKeys(t), pols, 0), pols, func(o *ratefallback.Options) { o.ReconcileEvery = time.Minute })
	srv.Kill()
	admitted := 0
	for i := range 8 {
		out := ask(fb, g.ID(), randomSubject(t), 1) // a new subject every time
		ev, ok := out.(ratelimit.Evaluated)
		require.True(t, ok, "call %d: %v", i, out)
		require.Equal(t, ratelimit.LocalEmergency, ev.Decision.Source)
		if ev.Decision.Allowed {
			admitted++
		}
	}
	assert.Equal(t, 5, admitted, "one share of 5 for all subjects together")
	assert.Equal(t, 1, fb.Stats().Subjects, "one local entry")

	// Redis back: the next decision, for any subject, is global and
	// carries the one pending charge (and go-redis's dial probe ends, so
	// no goroutine outlives the test).
	srv.Restart()
	var d ratelimit.Decision
	for stop := time.Now().Add(5 * time.Second); d.Source != ratelimit.GlobalRedis; {
		require.True(t, time.Now().Before(stop), "no global decision")
		out := ask(fb, g.ID(), randomSubject(t), 1)
		require.Equal(t, ratelimit.KindEvaluated, out.Kind(), "%v", out)
		d = out.(ratelimit.Evaluated).Decision
		time.Sleep(20 * time.Millisecond)
	}
	assert.Equal(t, map[ratelimit.PolicyID]int64{"backend": 0}, fb.Stats().Pending, "the global entry's charge went with that decision")
}

// TestLeakyShareKeepsMaxDelay: a queue's local share never needs a longer
// MaxDelay than the global queue's (leakyShare's argument), for every
// queue up to 40, every delay-free count, 1..8 instances and rates whose
// interval has a remainder: SharePolicy succeeds with MaxDelay at the
// global queue's own longest delay.
func TestLeakyShareKeepsMaxDelay(t *testing.T) {
	checked := 0
	for _, rate := range []int64{1, 3, 7, 10} {
		for q := int64(0); q <= 40; q++ {
			for d := int64(0); d <= q; d += 3 {
				global := ratelimit.LeakyBucket{Rate: rate, Period: time.Second, QueueSize: q, DelayAfter: d}
				global.MaxDelay = global.LongestDelay()
				for n := int64(1); n <= 8; n++ {
					sp, err := ratefallback.SharePolicy(localPolicy(t, "lf", global, 1, n))
					require.NoError(t, err, "%+v on %d instances", global, n)
					local := sp.Params().(ratelimit.LeakyBucket)
					require.LessOrEqual(t, local.LongestDelay(), global.MaxDelay)
					checked++
				}
			}
		}
	}
	require.Greater(t, checked, 2000)
}
