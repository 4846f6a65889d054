package ratedenial_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/ratedenial"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redisrate"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit/ratelimittest"
)

// TestConformanceOverFake runs the EdgePort conformance kit against the
// cache over the kit's Fake: every cached answer is the answer the port
// would have given.
func TestConformanceOverFake(t *testing.T) {
	keys := randomKeys(t)
	fakes := ratelimittest.FakePorts()
	ratelimittest.Run(t, func(t *testing.T, policies []ratelimit.Policy) ratelimit.EdgePort {
		return cache(t, fakes(t, policies), ratedenial.Options{Policies: policies, Keys: keys})
	})
}

func TestNewRejectsBadOptions(t *testing.T) {
	p := policy(t, "p", 1, ratelimit.FixedWindow{Limit: 5, Window: time.Second}, 1)
	inner := ratelimittest.NewFake(p)
	keys := randomKeys(t)
	for _, tt := range []struct {
		name  string
		inner ratelimit.EdgePort
		opts  ratedenial.Options
		want  string
	}{
		{"nil port", nil, ratedenial.Options{Policies: []ratelimit.Policy{p}, Keys: keys}, "inner port"},
		{"no policies", inner, ratedenial.Options{Keys: keys}, "Options.Policies"},
		{"no keys", inner, ratedenial.Options{Policies: []ratelimit.Policy{p}}, "Options.Keys"},
		{"table too large", inner, ratedenial.Options{Policies: []ratelimit.Policy{p}, Keys: keys, MaxEntries: ratedenial.MaxEntries + 1}, "Options.MaxEntries"},
		{"negative table", inner, ratedenial.Options{Policies: []ratelimit.Policy{p}, Keys: keys, MaxEntries: -1}, "Options.MaxEntries"},
		{"heartbeat", inner, ratedenial.Options{Policies: []ratelimit.Policy{p}, Keys: keys, Heartbeat: time.Millisecond}, "Options.Heartbeat"},
		{"zero policy", inner, ratedenial.Options{Policies: []ratelimit.Policy{{}}, Keys: keys}, "zero policy"},
		{"duplicate", inner, ratedenial.Options{Policies: []ratelimit.Policy{p, p}, Keys: keys}, "twice"},
		{"unknown opt-out", inner, ratedenial.Options{Policies: []ratelimit.Policy{p}, Keys: keys, Disabled: []ratelimit.PolicyID{"q"}}, "Options.Disabled"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ratedenial.New(tt.inner, tt.opts)
			require.Error(t, err)
			assert.Nil(t, c)
			assert.ErrorIs(t, err, ratedenial.ErrInvalidOptions)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

// algorithms are one small policy per algorithm, windows well under a
// second so that a trace crosses many of them.
func algorithms(t *testing.T, rev int64) []ratelimit.Policy {
	return []ratelimit.Policy{
		policy(t, "fixed", rev, ratelimit.FixedWindow{Limit: 4, Window: 200 * time.Millisecond}, 3),
		policy(t, "sliding", rev, ratelimit.SlidingWindowCounter{Limit: 4, Window: 200 * time.Millisecond}, 3),
		policy(t, "bucket", rev, ratelimit.TokenBucket{Capacity: 4, RefillTokens: 1, RefillPeriod: 70 * time.Millisecond}, 3),
		// 3 per 200 ms: T = 66,666.7 µs, decided to the microsecond.
		policy(t, "gcra", rev, ratelimit.GCRA{Rate: 3, Period: 200 * time.Millisecond, Burst: 4}, 3),
		policy(t, "log", rev, ratelimit.SlidingLog{Limit: 4, Window: 200 * time.Millisecond}, 3),
	}
}

// trace runs n requests of one subject under p at pre-drawn instants
// (gaps of 0..12 ms, costs 1..MaxCost) through port, setting clk to each
// instant first; the server reads its clock 0..3 ms later. It calls hit
// for every request the cache answered (hits counted by c) and returns
// the admitted count. The instants and latencies come from seed alone,
// so two runs see the same trace.
func trace(t *testing.T, p ratelimit.Policy, seed uint64, n int, port ratelimit.EdgePort, clk *clock, lat *latency, c *ratedenial.Cache, hit func(req ratelimit.Request, at time.Time)) int {
	return traceWith(t, p, seed, n, port, clk, lat, c, hit, 3_000)
}

// traceWith is trace with latencies 0..maxLatencyMicros-1 µs (0: none).
func traceWith(t *testing.T, p ratelimit.Policy, seed uint64, n int, port ratelimit.EdgePort, clk *clock, lat *latency, c *ratedenial.Cache, hit func(req ratelimit.Request, at time.Time), maxLatencyMicros int) int {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 1))
	subject := ratelimit.SubjectDigest("subject-of-the-trace-000000")
	at := time.UnixMilli(1_700_000_000_000).Add(time.Duration(rng.IntN(1000)) * time.Microsecond)
	admitted := 0
	for range n {
		at = at.Add(time.Duration(rng.IntN(12_000)) * time.Microsecond)
		lat.next = 0
		if maxLatencyMicros > 0 {
			lat.next = time.Duration(rng.IntN(maxLatencyMicros)) * time.Microsecond
		}
		clk.Set(at)
		req := ratelimit.Request{PolicyID: p.ID(), SubjectDigest: subject, Cost: 1 + rng.Int64N(p.MaxCost()), Deadline: at.Add(time.Hour)}
		var before uint64
		if c != nil {
			before = c.Stats().Hits
		}
		out := port.Evaluate(context.Background(), req)
		e, ok := out.(ratelimit.Evaluated)
		require.True(t, ok, "outcome %v", out)
		if c != nil && c.Stats().Hits > before {
			hit(req, at)
			assert.False(t, e.Decision.Allowed)
			assert.Positive(t, e.Decision.RetryAfter)
		}
		if e.Decision.Allowed {
			admitted++
		}
		// The next request comes after this one's reply.
		at = at.Add(lat.next)
	}
	return admitted
}

// latency is the modelServer's latency, set per request by trace.
type latency struct{ next time.Duration }

func (l *latency) get() time.Duration { return l.next }

// TestCachedDenialNeverOutlivesRetryAfter: with a controlled clock, the
// programs' model as the server (its clock the local one plus the call's
// latency, floored to milliseconds) and random traces of one subject per
// algorithm, every answer the cache gives is one the server would have
// given at that instant (it would deny), and the cache answers many.
func TestCachedDenialNeverOutlivesRetryAfter(t *testing.T) {
	for _, p := range algorithms(t, 1) {
		t.Run(p.Algorithm().String(), func(t *testing.T) {
			hits := 0
			for seed := range uint64(20) {
				clk := ratelimittest.NewClock(time.Time{})
				lat := &latency{}
				srv := newModelServer(clk, lat.get, p)
				c := cache(t, srv, ratedenial.Options{Policies: []ratelimit.Policy{p}, Keys: randomKeys(t), Now: clk.Now})
				trace(t, p, seed, 400, c, clk, lat, c, func(req ratelimit.Request, at time.Time) {
					hits++
					if srv.wouldAllow(req, at) {
						t.Errorf("seed %d: the cache denied cost %d at %v, the server would allow it", seed, req.Cost, at.UnixMicro())
					}
				})
			}
			assert.Greater(t, hits, 100, "the traces are denied often: the cache answered few")
		})
	}
}

// TestAttackerGetsNoMoreAdmissions: the same trace of one hammering
// subject with and without the cache admits exactly as many requests
// (the cache answers only denials the server would give at that instant,
// and a denial changes no state), and with the cache far fewer reach the
// server. The server decides at the instant the request is made (no
// latency): with a latency L, a request the cache denies within L of the
// server's expiry would have reached the server after it (the
// under-admission ADR 0022 bounds by the latency).
func TestAttackerGetsNoMoreAdmissions(t *testing.T) {
	for _, p := range algorithms(t, 1) {
		t.Run(p.Algorithm().String(), func(t *testing.T) {
			for seed := range uint64(10) {
				clk, lat := ratelimittest.NewClock(time.Time{}), &latency{}
				direct := newModelServer(clk, lat.get, p)
				without := traceWith(t, p, seed, 2000, direct, clk, lat, nil, nil, 0)

				clk, lat = ratelimittest.NewClock(time.Time{}), &latency{}
				srv := newModelServer(clk, lat.get, p)
				c := cache(t, srv, ratedenial.Options{Policies: []ratelimit.Policy{p}, Keys: randomKeys(t), Now: clk.Now})
				with := traceWith(t, p, seed, 2000, c, clk, lat, c, func(ratelimit.Request, time.Time) {}, 0)
				assert.Equal(t, without, with, "seed %d: admitted with the cache", seed)
				assert.Less(t, srv.calls, direct.calls, "seed %d: calls that reached the server", seed)
			}
		})
	}
}

// denyAll is a port that denies everything with retry-after 10s (and
// counts its calls); its decisions carry the policy's revision.
func denyAll(p ratelimit.Policy, calls *int) *ratelimittest.Fake {
	return &ratelimittest.Fake{Func: func(_ context.Context, req ratelimit.Request) ratelimit.Outcome {
		*calls++
		return ratelimit.Evaluated{Decision: ratelimit.Decision{Limit: p.Limit(), Remaining: 1, RetryAfter: 10 * time.Second,
			ResetAt: time.UnixMilli(1_000_020_000), ServerNow: time.UnixMilli(1_000_000_000),
			PolicyID: req.PolicyID, PolicyRevision: p.Revision(), Source: ratelimit.GlobalRedis, Certainty: ratelimit.Certain}}
	}, DontRecord: true}
}

// TestWhatGoesToTheServer: a cost below the denied one, an expired entry,
// a request with an evaluation ID, a new revision (another cache over the
// same server), an opted-out policy and a request the port must refuse
// all reach the port; a larger cost is answered locally with the fields
// counted down from the cached instants.
func TestWhatGoesToTheServer(t *testing.T) {
	p := policy(t, "p", 1, ratelimit.FixedWindow{Limit: 5, Window: time.Minute}, 5)
	clk := ratelimittest.NewClock(time.Unix(1_000_000, 0))
	calls := 0
	c := cache(t, denyAll(p, &calls), ratedenial.Options{Policies: []ratelimit.Policy{p}, Keys: randomKeys(t), Now: clk.Now})
	s := randomSubject(t)
	req := func(cost int64) ratelimit.Request {
		return ratelimit.Request{PolicyID: "p", SubjectDigest: s, Cost: cost, Deadline: clk.Now().Add(time.Second)}
	}
	ctx := context.Background()

	c.Evaluate(ctx, req(3))
	require.Equal(t, 1, calls)
	clk.Set(clk.Now().Add(4 * time.Second))
	out := c.Evaluate(ctx, req(4))
	assert.Equal(t, 1, calls, "a larger cost is answered locally")
	d := out.(ratelimit.Evaluated).Decision
	assert.False(t, d.Allowed)
	assert.Equal(t, 10*time.Second-time.Millisecond-4*time.Second, d.RetryAfter, "counted down from the entry's expiry")
	assert.Equal(t, time.UnixMilli(1_000_004_000), d.ServerNow, "advanced by the local time since the call was sent")
	assert.Equal(t, time.UnixMilli(1_000_020_000), d.ResetAt, "the server's instant")
	assert.Equal(t, int64(1), d.Remaining, "the server's last remaining")
	assert.Equal(t, uint64(1), c.Stats().Hits)

	c.Evaluate(ctx, req(2))
	assert.Equal(t, 2, calls, "a smaller cost goes to the server (and its denial is recorded)")
	c.Evaluate(ctx, req(2))
	assert.Equal(t, 2, calls, "the cost-2 denial is cached")

	withID := req(5)
	withID.EvaluationID = "e-1"
	c.Evaluate(ctx, withID)
	assert.Equal(t, 3, calls, "an evaluation ID goes to the server (it may be a replay)")

	above := req(6)
	c.Evaluate(ctx, above)
	assert.Equal(t, 4, calls, "a cost above MaxCost goes to the port's precheck")
	passed := req(5)
	passed.Deadline = clk.Now().Add(-time.Millisecond)
	c.Evaluate(ctx, passed)
	assert.Equal(t, 5, calls, "a passed deadline goes to the port's precheck")

	clk.Set(clk.Now().Add(10 * time.Second))
	c.Evaluate(ctx, req(5))
	assert.Equal(t, 6, calls, "an expired entry goes to the server")

	p2 := policy(t, "p", 2, ratelimit.FixedWindow{Limit: 5, Window: time.Minute}, 5)
	calls2 := 0
	c2 := cache(t, denyAll(p2, &calls2), ratedenial.Options{Policies: []ratelimit.Policy{p2}, Keys: randomKeys(t), Now: clk.Now})
	c2.Evaluate(ctx, req(5))
	assert.Equal(t, 1, calls2, "revision 2 has no entry of revision 1")

	off := 0
	c3 := cache(t, denyAll(p, &off), ratedenial.Options{Policies: []ratelimit.Policy{p}, Keys: randomKeys(t), Now: clk.Now, Disabled: []ratelimit.PolicyID{"p"}})
	c3.Evaluate(ctx, req(1))
	c3.Evaluate(ctx, req(1))
	assert.Equal(t, 2, off, "an opted-out policy is never cached")
	assert.Zero(t, c3.Stats().Entries)
}

// TestOnlyGlobalDenialsOfTheRevisionAreRecorded: a local emergency
// denial, a replayed decision, another revision's decision and a denial
// without a retry-after are not recorded.
func TestOnlyGlobalDenialsOfTheRevisionAreRecorded(t *testing.T) {
	p := policy(t, "p", 1, ratelimit.TokenBucket{Capacity: 5, RefillTokens: 1, RefillPeriod: time.Second}, 5)
	base := ratelimit.Decision{Limit: 5, RetryAfter: time.Second, PolicyID: "p", PolicyRevision: 1, Source: ratelimit.GlobalRedis, Certainty: ratelimit.Certain}
	for name, mutate := range map[string]func(*ratelimit.Decision){
		"local emergency": func(d *ratelimit.Decision) {
			d.Source, d.Certainty = ratelimit.LocalEmergency, ratelimit.ApproximateLocal
		},
		"replayed":       func(d *ratelimit.Decision) { d.Replayed = true },
		"other revision": func(d *ratelimit.Decision) { d.PolicyRevision = 2 },
		"no retry":       func(d *ratelimit.Decision) { d.RetryAfter = 0 },
		"retry of 1ms":   func(d *ratelimit.Decision) { d.RetryAfter = time.Millisecond },
	} {
		t.Run(name, func(t *testing.T) {
			d := base
			mutate(&d)
			c := cache(t, &ratelimittest.Fake{Outcome: ratelimit.Evaluated{Decision: d}}, ratedenial.Options{Policies: []ratelimit.Policy{p}, Keys: randomKeys(t)})
			ask(c, "p", randomSubject(t), 1)
			assert.Zero(t, c.Stats().Entries)
		})
	}
	t.Run("a global denial", func(t *testing.T) {
		c := cache(t, &ratelimittest.Fake{Outcome: ratelimit.Evaluated{Decision: base}}, ratedenial.Options{Policies: []ratelimit.Policy{p}, Keys: randomKeys(t)})
		ask(c, "p", randomSubject(t), 1)
		assert.Equal(t, 1, c.Stats().Entries)
	})
}

// TestInvalidation: Invalidate drops the entry of the state key, and an
// invalidation that arrives while a denial is in flight keeps that denial
// from being recorded (it may predate the reset).
func TestInvalidation(t *testing.T) {
	p := policy(t, "p", 1, ratelimit.FixedWindow{Limit: 5, Window: time.Minute}, 5)
	keys := randomKeys(t)
	s := randomSubject(t)
	stateKey, err := redisrate.StateKey(keys, p, s)
	require.NoError(t, err)
	calls := 0
	var c *ratedenial.Cache
	inner := denyAll(p, &calls)
	c = cache(t, inner, ratedenial.Options{Policies: []ratelimit.Policy{p}, Keys: keys})
	ask(c, "p", s, 1)
	require.Equal(t, 1, c.Stats().Entries)
	assert.False(t, c.Invalidate("some-other-key"))
	assert.True(t, c.Invalidate(stateKey))
	assert.Zero(t, c.Stats().Entries)
	assert.Equal(t, uint64(2), c.Stats().Invalidations)

	deny := inner.Func
	inner.Func = func(ctx context.Context, req ratelimit.Request) ratelimit.Outcome {
		out := deny(ctx, req)
		c.Invalidate(stateKey) // the reset crosses the call
		return out
	}
	ask(c, "p", s, 1)
	assert.Zero(t, c.Stats().Entries, "a denial crossed by an invalidation is not recorded")
}

// TestTableIsBounded: a full table drops an entry to record a new one and
// counts it; expired entries go first.
func TestTableIsBounded(t *testing.T) {
	p := policy(t, "p", 1, ratelimit.FixedWindow{Limit: 5, Window: time.Minute}, 5)
	clk := ratelimittest.NewClock(time.Unix(1_000_000, 0))
	calls := 0
	c := cache(t, denyAll(p, &calls), ratedenial.Options{Policies: []ratelimit.Policy{p}, Keys: randomKeys(t), MaxEntries: 3, Now: clk.Now})
	for range 5 {
		c.Evaluate(context.Background(), ratelimit.Request{PolicyID: "p", SubjectDigest: randomSubject(t), Cost: 1, Deadline: clk.Now().Add(time.Second)})
	}
	st := c.Stats()
	assert.Equal(t, 3, st.Entries)
	assert.Equal(t, 3, st.MaxEntries)
	assert.Equal(t, uint64(2), st.Evicted)

	clk.Set(clk.Now().Add(time.Minute)) // all expired
	c.Evaluate(context.Background(), ratelimit.Request{PolicyID: "p", SubjectDigest: randomSubject(t), Cost: 1, Deadline: clk.Now().Add(time.Second)})
	st = c.Stats()
	assert.Equal(t, 1, st.Entries, "the sweep dropped the expired entries")
	assert.Equal(t, uint64(2), st.Evicted, "no live entry was evicted")
}

// TestExactAlgorithms: the five algorithms are exact; anything
// else (an algorithm added later) is off until it is listed.
func TestExactAlgorithms(t *testing.T) {
	for _, a := range []ratelimit.Algorithm{ratelimit.AlgorithmFixedWindow, ratelimit.AlgorithmSlidingWindowCounter, ratelimit.AlgorithmTokenBucket, ratelimit.AlgorithmGCRA, ratelimit.AlgorithmSlidingLog} {
		assert.True(t, ratedenial.Exact(a), a.String())
	}
	assert.False(t, ratedenial.Exact(0))
	assert.False(t, ratedenial.Exact(99))
}

// TestGlobalDenialIsEverySubjects: a global policy's denial is cached
// under ratelimit.GlobalSubject, so it answers every subject (ADR 0027),
// while a subject policy's denial answers only its subject.
func TestGlobalDenialIsEverySubjects(t *testing.T) {
	p := policy(t, "p", 1, ratelimit.FixedWindow{Limit: 5, Window: time.Minute}, 5)
	g, err := ratelimit.NewPolicy(ratelimit.PolicySpec{ID: "g", Revision: 1, Algorithm: ratelimit.AlgorithmFixedWindow,
		Params: ratelimit.FixedWindow{Limit: 5, Window: time.Minute}, MaxCost: 5, CleanupGrace: time.Minute,
		FailurePolicy: ratelimit.FailClosed, Scope: ratelimit.ScopeGlobal})
	require.NoError(t, err)
	clk := ratelimittest.NewClock(time.Unix(1_000_000, 0))
	gotSubjects := []ratelimit.SubjectDigest{}
	inner := ratelimittestFunc(func(req ratelimit.Request) ratelimit.Outcome {
		gotSubjects = append(gotSubjects, req.SubjectDigest)
		pol := p
		if req.PolicyID == "g" {
			pol = g
		}
		return ratelimit.Evaluated{Decision: ratelimit.Decision{PolicyID: pol.ID(), PolicyRevision: 1, Limit: 5,
			RetryAfter: 10 * time.Second, ServerNow: clk.Now(), ResetAt: clk.Now().Add(time.Minute), Source: ratelimit.GlobalRedis}}
	})
	c := cache(t, inner, ratedenial.Options{Policies: []ratelimit.Policy{p, g}, Keys: randomKeys(t), Now: clk.Now})
	a, b := randomSubject(t), randomSubject(t)
	ctx := context.Background()
	req := func(id ratelimit.PolicyID, s ratelimit.SubjectDigest) ratelimit.Request {
		return ratelimit.Request{PolicyID: id, SubjectDigest: s, Cost: 1, Deadline: clk.Now().Add(time.Second)}
	}
	c.Evaluate(ctx, req("g", a))
	require.Len(t, gotSubjects, 1)
	assert.Equal(t, ratelimit.GlobalSubject, gotSubjects[0], "the inner port is asked for the global subject")
	c.Evaluate(ctx, req("g", b))
	assert.Len(t, gotSubjects, 1, "another subject is answered by the global denial")
	c.Evaluate(ctx, req("p", a))
	c.Evaluate(ctx, req("p", b))
	assert.Len(t, gotSubjects, 3, "a subject policy's denial is its subject's only")
}

// ratelimittestFunc is a port answering fn.
type ratelimittestFunc func(ratelimit.Request) ratelimit.Outcome

func (f ratelimittestFunc) Evaluate(_ context.Context, req ratelimit.Request) ratelimit.Outcome {
	return f(req)
}

// errNoSets is the cause of what a ratelimittestFunc answers a set or a
// refund: it decides single requests only.
var errNoSets = errors.New("test port: single requests only")

func (f ratelimittestFunc) EvaluateSet(_ context.Context, req ratelimit.SetRequest) ratelimit.Outcome {
	return ratelimit.Incompatible{PolicyID: req.FirstMember(), Category: ratelimit.CategoryProgramFault, Cause: errNoSets}
}

func (f ratelimittestFunc) Refund(_ context.Context, req ratelimit.Request, _ ratelimit.Receipt) ratelimit.Outcome {
	return ratelimit.Incompatible{PolicyID: req.PolicyID, Category: ratelimit.CategoryProgramFault, Cause: errNoSets}
}
