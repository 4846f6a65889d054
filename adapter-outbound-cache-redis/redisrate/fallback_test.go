package redisrate

import (
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/programs"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/internal/certainty"
)

func fallbackPolicy(t testing.TB, id ratelimit.PolicyID, params ratelimit.Params, n int64) ratelimit.Policy {
	t.Helper()
	p, err := ratelimit.NewPolicy(ratelimit.PolicySpec{
		ID: id, Revision: 1, Algorithm: params.Algorithm(), Params: params, MaxCost: 2,
		CleanupGrace: time.Minute, MaxClockRegression: 2 * time.Second,
		FailurePolicy: ratelimit.LocalFallback, FallbackInstances: n,
	})
	require.NoError(t, err)
	return p
}

// fallbackOver builds a Fallback over a fake-commander provider holding a
// local-fallback fixed window "lf" (10 per minute, 2 instances: share 5)
// and the fail-closed test policies.
func fallbackOver(t testing.TB, f *fakeCommander, breaker BreakerOptions, opts FallbackOptions) (*Fallback, *Provider) {
	t.Helper()
	pols := append(testPolicies(t), fallbackPolicy(t, "lf", ratelimit.FixedWindow{Limit: 10, Window: time.Minute}, 2))
	p, err := newProvider(f, testKeys(t), pols, Options{CommandTimeout: testTimeout, MaxInFlight: 4, Now: func() time.Time { return t0 }, Breaker: breaker})
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	if opts.Now == nil {
		opts.Now = func() time.Time { return t0 }
	}
	fb, err := NewFallback(p, opts)
	require.NoError(t, err)
	return fb, p
}

func down(int, sentCommand) fakeReply {
	return fakeReply{err: &certainty.DialError{Err: io.EOF}, unwritten: true}
}

// TestFallbackDecidesLocallyOnTheShareWhileRedisIsUnreachable: connection
// failures and then the open breaker are answered by the local model on
// limit/N: 5 admits, then denials, each LocalEmergency and
// ApproximateLocal; the admits are pending for reconciliation.
func TestFallbackDecidesLocallyOnTheShareWhileRedisIsUnreachable(t *testing.T) {
	f := &fakeCommander{respond: down}
	fb, p := fallbackOver(t, f, BreakerOptions{Threshold: 2, ProbeInterval: time.Minute}, FallbackOptions{})
	var allowed, denied int
	for i := range 8 {
		out := fb.Evaluate(context.Background(), request("lf", subjectA, 1, t0))
		require.Equal(t, ratelimit.KindEvaluated, out.Kind(), "call %d: %v", i, out)
		d := out.(ratelimit.Evaluated).Decision
		assert.Equal(t, ratelimit.LocalEmergency, d.Source)
		assert.Equal(t, ratelimit.ApproximateLocal, d.Certainty)
		assert.Equal(t, int64(5), d.Limit, "the share")
		assert.Equal(t, ratelimit.PolicyID("lf"), d.PolicyID)
		if d.Allowed {
			allowed++
			assert.Equal(t, int64(5-allowed), d.Remaining)
		} else {
			denied++
			assert.Positive(t, d.RetryAfter)
		}
	}
	assert.Equal(t, 5, allowed)
	assert.Equal(t, 3, denied)
	assert.Equal(t, BreakerOpen, p.BreakerState())
	// The first program call and the charge of the first local admit
	// (sent through the same send loop, so the same breaker: ADR 0016)
	// failed and opened the breaker; the charge stays pending.
	assert.Equal(t, 2, countNamed(f, cmdEvalSha), "the breaker stopped the sends")
	assert.Equal(t, map[ratelimit.PolicyID]int64{"lf": 5}, fb.Pending())
	// Another subject has its own share.
	out := fb.Evaluate(context.Background(), request("lf", subjectB, 2, t0))
	assert.True(t, ratelimit.Admitted(out), "%v", out)
	assert.Equal(t, map[ratelimit.PolicyID]int64{"lf": 7}, fb.Pending())
}

// TestFallbackOnlyOnUnavailableOfALocalFallbackPolicy: fail-closed
// policies, Indeterminate, Incompatible, other Unavailable categories and
// Evaluated outcomes pass through unchanged.
func TestFallbackOnlyOnUnavailableOfALocalFallbackPolicy(t *testing.T) {
	tests := []struct {
		name   string
		policy ratelimit.PolicyID
		r      fakeReply
		cat    ratelimit.Category
	}{
		{"fail-closed policy, connection", "fw", fakeReply{err: &certainty.DialError{Err: io.EOF}, unwritten: true}, ratelimit.CategoryConnection},
		{"timeout after write (indeterminate)", "lf", fakeReply{err: errReadTimeout}, ratelimit.CategoryTimeout},
		{"connection lost (indeterminate)", "lf", fakeReply{err: io.EOF}, ratelimit.CategoryConnectionLost},
		{"incompatible", "lf", fakeReply{err: redis.Nil}, ratelimit.CategoryMalformedReply},
		{"server rejected", "lf", fakeReply{err: serverError(msgOOM)}, ratelimit.CategoryServerRejected},
		{"admission", "lf", fakeReply{err: redis.ErrPoolTimeout, unwritten: true}, ratelimit.CategoryAdmission},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeCommander{respond: func(int, sentCommand) fakeReply { return tt.r }}
			fb, _ := fallbackOver(t, f, BreakerOptions{}, FallbackOptions{})
			out := fb.Evaluate(context.Background(), request(tt.policy, subjectA, 1, t0))
			assert.NotEqual(t, ratelimit.KindEvaluated, out.Kind(), "%v", out)
			assert.Equal(t, tt.cat, ratelimit.CategoryOf(out))
			assert.Empty(t, fb.Pending())
			assert.Zero(t, fb.Subjects())
		})
	}
	t.Run("evaluated passes through", func(t *testing.T) {
		pol := fallbackPolicy(t, "lf", ratelimit.FixedWindow{Limit: 10, Window: time.Minute}, 2)
		f := &fakeCommander{respond: func(int, sentCommand) fakeReply { return fakeReply{val: modelReply(pol, t0, 1)} }}
		fb, _ := fallbackOver(t, f, BreakerOptions{}, FallbackOptions{})
		out := fb.Evaluate(context.Background(), request("lf", subjectA, 1, t0))
		require.True(t, ratelimit.Admitted(out), "%v", out)
		assert.Equal(t, ratelimit.GlobalRedis, out.(ratelimit.Evaluated).Decision.Source)
		assert.Equal(t, int64(10), out.(ratelimit.Evaluated).Decision.Limit)
		assert.Empty(t, fb.Pending())
	})
	t.Run("invalid request is refused before", func(t *testing.T) {
		fb, _ := fallbackOver(t, &fakeCommander{respond: down}, BreakerOptions{}, FallbackOptions{})
		out := fb.Evaluate(context.Background(), request("lf", subjectA, 0, t0))
		assert.Equal(t, ratelimit.CategoryInvalidRequest, ratelimit.CategoryOf(out))
	})
}

// TestFallbackTableIsBounded: a full table of live state refuses new
// subjects (the Unavailable outcome stands, with ErrFallbackFull); expired
// state that owes no charge is swept to make room.
func TestFallbackTableIsBounded(t *testing.T) {
	now := t0
	fb, _ := fallbackOver(t, &fakeCommander{respond: down}, BreakerOptions{}, FallbackOptions{MaxSubjects: 3, Now: func() time.Time { return now }})
	subject := func(i int) ratelimit.SubjectDigest {
		return ratelimit.SubjectDigest(fmt.Sprintf("c3ViamVjdC1%07d", i))
	}
	for i := range 3 {
		require.True(t, ratelimit.Admitted(fb.Evaluate(context.Background(), request("lf", subject(i), 1, now))))
	}
	out := fb.Evaluate(context.Background(), request("lf", subject(3), 1, now))
	require.Equal(t, ratelimit.KindUnavailable, out.Kind())
	assert.ErrorIs(t, out.(ratelimit.Unavailable).Cause, ErrFallbackFull)
	assert.Equal(t, 3, fb.Subjects())

	// Expired, but the admits still owe their charge: kept.
	now = now.Add(time.Hour)
	out = fb.Evaluate(context.Background(), request("lf", subject(4), 1, now))
	assert.Equal(t, ratelimit.KindUnavailable, out.Kind(), "pending charges are never dropped")
	fb.mu.Lock()
	for _, e := range fb.table {
		e.pending = 0 // as after reconciliation
	}
	fb.mu.Unlock()
	now = now.Add(2 * fallbackSweepEvery)
	out = fb.Evaluate(context.Background(), request("lf", subject(5), 1, now))
	assert.True(t, ratelimit.Admitted(out), "expired state swept: %v", out)
	assert.Equal(t, 1, fb.Subjects())
}

// TestFallbackCostAboveTheShareFailsClosed: a cost the share can never
// admit keeps the Unavailable outcome.
func TestFallbackCostAboveTheShareFailsClosed(t *testing.T) {
	pols := append(testPolicies(t), fallbackPolicy(t, "lf", ratelimit.FixedWindow{Limit: 2, Window: time.Minute}, 2)) // share 1, MaxCost 2
	p, err := newProvider(&fakeCommander{respond: down}, testKeys(t), pols, Options{CommandTimeout: testTimeout, MaxInFlight: 4, Now: func() time.Time { return t0 }})
	require.NoError(t, err)
	fb, err := NewFallback(p, FallbackOptions{Now: func() time.Time { return t0 }})
	require.NoError(t, err)
	assert.Equal(t, ratelimit.CategoryConnection, ratelimit.CategoryOf(fb.Evaluate(context.Background(), request("lf", subjectA, 2, t0))))
	assert.True(t, ratelimit.Admitted(fb.Evaluate(context.Background(), request("lf", subjectA, 1, t0))))
}

func TestSharePolicy(t *testing.T) {
	tests := []struct {
		params ratelimit.Params
		n      int64
		want   ratelimit.Params
	}{
		{ratelimit.FixedWindow{Limit: 10, Window: time.Minute}, 3, ratelimit.FixedWindow{Limit: 3, Window: time.Minute}},
		{ratelimit.SlidingWindowCounter{Limit: 10, Window: time.Minute}, 20, ratelimit.SlidingWindowCounter{Limit: 1, Window: time.Minute}},
		{ratelimit.TokenBucket{Capacity: 10, RefillTokens: 4, RefillPeriod: time.Second}, 2, ratelimit.TokenBucket{Capacity: 5, RefillTokens: 4, RefillPeriod: 2 * time.Second}},
	}
	for _, tt := range tests {
		sp, err := SharePolicy(fallbackPolicy(t, "lf", tt.params, tt.n))
		require.NoError(t, err)
		assert.Equal(t, tt.want, sp.Params())
		assert.Equal(t, ratelimit.FailClosed, sp.FailurePolicy())
		assert.LessOrEqual(t, sp.MaxCost(), sp.Limit())
	}
	_, err := SharePolicy(fixedPolicy(t, "fw", 5, time.Minute))
	assert.Error(t, err, "fail-closed has no share")
}

// TestFallbackReconcileChargesPendingAdmits: after the outage, Reconcile
// sends each subject's pending admits once with the charge program
// (EVALSHA of its manifest digest, cost = the units) and clears them; a
// charge that may have run (Indeterminate) stays pending; a subject's next
// request charges its own pending admits before the global decision.
func TestFallbackReconcileChargesPendingAdmits(t *testing.T) {
	var healthy, lost bool
	pol := fallbackPolicy(t, "lf", ratelimit.FixedWindow{Limit: 10, Window: time.Minute}, 2)
	f := &fakeCommander{respond: func(_ int, c sentCommand) fakeReply {
		switch {
		case lost:
			return fakeReply{err: errReadTimeout}
		case !healthy:
			return fakeReply{err: &certainty.DialError{Err: io.EOF}, unwritten: true}
		}
		return fakeReply{val: modelReply(pol, t0, 1)}
	}}
	fb, _ := fallbackOver(t, f, BreakerOptions{}, FallbackOptions{})
	for range 3 {
		require.True(t, ratelimit.Admitted(fb.Evaluate(context.Background(), request("lf", subjectA, 1, t0))))
	}
	require.True(t, ratelimit.Admitted(fb.Evaluate(context.Background(), request("lf", subjectB, 2, t0))))
	require.Equal(t, map[ratelimit.PolicyID]int64{"lf": 5}, fb.Pending())

	charge, ok := programs.ChargeFor(ratelimit.AlgorithmFixedWindow)
	require.True(t, ok)
	f.mu.Lock()
	lost = true
	f.mu.Unlock()
	_, err := fb.Reconcile(context.Background())
	require.Error(t, err, "an Indeterminate charge is reported")
	assert.Equal(t, map[ratelimit.PolicyID]int64{"lf": 5}, fb.Pending(), "and stays pending")

	f.mu.Lock()
	lost, healthy = false, true
	f.sent = nil
	f.mu.Unlock()
	// Subject A's next request charges A's 3 first, then asks globally.
	out := fb.Evaluate(context.Background(), request("lf", subjectA, 1, t0))
	require.True(t, ratelimit.Admitted(out), "%v", out)
	sent := f.commands()
	require.Len(t, sent, 2)
	assert.Equal(t, charge.SHA1, sent[0].program, "the charge program first")
	assert.Equal(t, int64(3), sent[0].argv[programs.ArgCost], "A's pending units")
	assert.NotEqual(t, charge.SHA1, sent[1].program, "then the decision")
	assert.Equal(t, map[ratelimit.PolicyID]int64{"lf": 2}, fb.Pending())

	n, err := fb.Reconcile(context.Background())
	require.NoError(t, err)
	assert.Equal(t, int64(2), n)
	assert.Empty(t, fb.Pending())
	n, err = fb.Reconcile(context.Background())
	require.NoError(t, err)
	assert.Zero(t, n, "nothing is charged twice")
}

// TestFallbackNilContextAndShortDeadline: a nil context is refused as by
// the provider (no panic, even with a pending charge), and a deadline too
// short for a charge and a decision skips the per-subject charge.
func TestFallbackNilContextAndShortDeadline(t *testing.T) {
	f := &fakeCommander{respond: down}
	fb, _ := fallbackOver(t, f, BreakerOptions{}, FallbackOptions{})
	require.True(t, ratelimit.Admitted(fb.Evaluate(context.Background(), request("lf", subjectA, 1, t0))))
	//nolint:staticcheck // a nil context on purpose
	out := fb.Evaluate(nil, request("lf", subjectA, 1, t0))
	assert.Equal(t, ratelimit.CategoryInvalidRequest, ratelimit.CategoryOf(out))

	before := len(f.commands())
	req := request("lf", subjectA, 1, t0)
	req.Deadline = t0.Add(testTimeout + testTimeout/2) // room for one call, not two
	out = fb.Evaluate(context.Background(), req)
	assert.True(t, ratelimit.Admitted(out), "decided locally: %v", out)
	assert.Len(t, f.commands(), before+1, "no charge attempt, only the decision")
}
