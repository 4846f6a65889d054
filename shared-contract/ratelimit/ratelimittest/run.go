package ratelimittest

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"testing"
	"time"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// NewPort builds the EdgePort under test for policies. Every call within
// one Run must share one backing store, so that a second port (Run builds
// one at revision 2) sees the state the first left, as two provider
// instances over one server do. It may register cleanups on t.
type NewPort func(t *testing.T, policies []ratelimit.Policy) ratelimit.EdgePort

// Policies returns the policies Run uses: one per algorithm, limit (or
// capacity, or burst) and MaxCost 5, window, refill period or period one
// hour (a real clock cannot change a
// decision while a case runs), at revision rev.
func Policies(t testing.TB, rev int64) []ratelimit.Policy {
	t.Helper()
	specs := []ratelimit.PolicySpec{
		{ID: "c-fixed", Params: ratelimit.FixedWindow{Limit: 5, Window: time.Hour}},
		{ID: "c-sliding", Params: ratelimit.SlidingWindowCounter{Limit: 5, Window: time.Hour}},
		{ID: "c-bucket", Params: ratelimit.TokenBucket{Capacity: 5, RefillTokens: 1, RefillPeriod: time.Hour}},
		{ID: "c-gcra", Params: ratelimit.GCRA{Rate: 1, Period: time.Hour, Burst: 5}},
		{ID: "c-log", Params: ratelimit.SlidingLog{Limit: 5, Window: time.Hour}},
		// A queue whose 4 waiters all go without delay (ADR 0028): the
		// kit's sequences need no hold.
		{ID: "c-queue", Params: ratelimit.LeakyBucket{Rate: 1, Period: time.Hour, QueueSize: 4, DelayAfter: 4}},
		// Five slots held 30 s, the longest a service allows (ADR 0041):
		// the kit never gives one back, and a sequence ends well within it.
		{ID: "c-inflight", Params: ratelimit.Concurrency{Limit: 5, MaxHold: ratelimit.DefaultMaxHold}},
	}
	out := make([]ratelimit.Policy, 0, len(specs))
	for _, s := range specs {
		s.Revision, s.MaxCost, s.MaxClockRegression = rev, 5, 2*time.Second
		s.Algorithm = s.Params.Algorithm()
		s.CleanupGrace = time.Minute
		s.FailurePolicy = ratelimit.FailClosed
		p, err := ratelimit.NewPolicy(s)
		if err != nil {
			t.Fatalf("ratelimittest: policy %s: %v", s.ID, err)
		}
		out = append(out, p)
	}
	return out
}

// Subject returns a fresh random subject digest.
func Subject(t testing.TB) ratelimit.SubjectDigest {
	t.Helper()
	b := make([]byte, 18)
	if _, err := rand.Read(b); err != nil {
		t.Fatalf("ratelimittest: random subject: %v", err)
	}
	return ratelimit.SubjectDigest(base64.RawURLEncoding.EncodeToString(b))
}

// step is one request of a sequence and the decision it must get.
type step struct {
	cost      int64
	allowed   bool
	remaining int64
}

func ask(port ratelimit.EdgePort, id ratelimit.PolicyID, subject ratelimit.SubjectDigest, cost int64) ratelimit.Outcome {
	return port.Evaluate(context.Background(), ratelimit.Request{PolicyID: id, SubjectDigest: subject, Cost: cost, Deadline: time.Now().Add(30 * time.Second)})
}

func evaluated(t *testing.T, out ratelimit.Outcome, what string) ratelimit.Decision {
	t.Helper()
	e, ok := out.(ratelimit.Evaluated)
	if !ok {
		t.Fatalf("%s: want Evaluated, got %v", what, out)
	}
	if ratelimit.Admitted(out) != e.Decision.Allowed {
		t.Errorf("%s: Admitted %t but Allowed %t", what, ratelimit.Admitted(out), e.Decision.Allowed)
	}
	return e.Decision
}

func runSteps(t *testing.T, port ratelimit.EdgePort, p ratelimit.Policy, subject ratelimit.SubjectDigest, steps []step) {
	t.Helper()
	for i, s := range steps {
		d := evaluated(t, ask(port, p.ID(), subject, s.cost), "step")
		if d.Allowed != s.allowed || d.Remaining != s.remaining {
			t.Errorf("step %d (cost %d): allowed %t remaining %d, want allowed %t remaining %d", i, s.cost, d.Allowed, d.Remaining, s.allowed, s.remaining)
		}
	}
}

// refused checks out is a refusal of the given kind and category.
func refused(t *testing.T, out ratelimit.Outcome, kind ratelimit.OutcomeKind, cat ratelimit.Category) {
	t.Helper()
	if out == nil {
		t.Fatalf("nil outcome, want %s{%s}", kind, cat)
	}
	if out.Kind() != kind || ratelimit.CategoryOf(out) != cat {
		t.Errorf("got %v, want %s{%s}", out, kind, cat)
	}
	if ratelimit.Admitted(out) {
		t.Errorf("refusal %v admits", out)
	}
}

// Run checks the behaviour every ratelimit.EdgePort must have, per
// algorithm of Policies, with parallel subtests: admission up to the limit
// then denial, a denial consumes nothing, exact boundaries, independent
// subjects, the decision fields (limit, policy, revision, source,
// certainty, retry and reset within the horizon), validation
// (invalid_request, unknown_policy, a passed deadline is
// Unavailable{deadline}; none consumes anything) and a new revision
// starting from fresh state.
func Run(t *testing.T, newPort NewPort) {
	t.Helper()
	// The fixed and sliding windows of Policies end on the hour: no case
	// may run across that end (a run takes seconds; a minute is margin).
	ClearOfWindowEnd(t, time.Hour, time.Minute)
	for _, p := range Policies(t, 1) {
		t.Run(p.Algorithm().String(), func(t *testing.T) {
			t.Parallel()
			port := newPort(t, Policies(t, 1))
			runPolicy(t, newPort, port, p)
		})
	}
}

func runPolicy(t *testing.T, newPort NewPort, port ratelimit.EdgePort, p ratelimit.Policy) {
	t.Run("admits up to the limit then denies", func(t *testing.T) {
		t.Parallel()
		runSteps(t, port, p, Subject(t), []step{
			{1, true, 4}, {1, true, 3}, {1, true, 2}, {1, true, 1}, {1, true, 0},
			{1, false, 0}, {1, false, 0},
		})
	})
	t.Run("a denial consumes nothing", func(t *testing.T) {
		t.Parallel()
		runSteps(t, port, p, Subject(t), []step{
			{3, true, 2}, {3, false, 2}, {5, false, 2}, {2, true, 0}, {1, false, 0},
		})
	})
	t.Run("exact boundary after a denial", func(t *testing.T) {
		t.Parallel()
		runSteps(t, port, p, Subject(t), []step{{4, true, 1}, {2, false, 1}, {1, true, 0}})
	})
	t.Run("subjects are independent", func(t *testing.T) {
		t.Parallel()
		a, b := Subject(t), Subject(t)
		runSteps(t, port, p, a, []step{{5, true, 0}, {1, false, 0}})
		runSteps(t, port, p, b, []step{{1, true, 4}})
	})
	t.Run("decision fields", func(t *testing.T) {
		t.Parallel()
		subject := Subject(t)
		before := time.Now()
		d := evaluated(t, ask(port, p.ID(), subject, 2), "first call")
		horizon := time.Duration(p.HorizonMillis()) * time.Millisecond
		switch {
		case !d.Allowed:
			t.Errorf("first call denied: %v", d)
		case d.Limit != p.Limit():
			t.Errorf("Limit %d, want %d", d.Limit, p.Limit())
		case d.PolicyID != p.ID() || d.PolicyRevision != p.Revision():
			t.Errorf("policy %s rev %d, want %s rev %d", d.PolicyID, d.PolicyRevision, p.ID(), p.Revision())
		case d.Source == 0:
			t.Errorf("no Source")
		case d.Certainty != p.Certainty():
			t.Errorf("Certainty %v, want the policy's %v", d.Certainty, p.Certainty())
		case d.RetryAfter != 0:
			t.Errorf("allowed with RetryAfter %v", d.RetryAfter)
		case !d.ResetAt.After(before.Add(-time.Second)) || d.ResetAt.After(before.Add(horizon+time.Minute)):
			t.Errorf("ResetAt %v not within the horizon %v of %v", d.ResetAt, horizon, before)
		}
		if wait, known := d.ResetAfter(); known && (wait <= 0 || wait > horizon) {
			t.Errorf("ResetAfter %v not in (0, %v]", wait, horizon)
		}
		d = evaluated(t, ask(port, p.ID(), subject, 4), "second call")
		if d.Allowed || d.RetryAfter <= 0 || d.RetryAfter > horizon {
			t.Errorf("second call: allowed %t RetryAfter %v, want a denial with a retry in (0, %v]", d.Allowed, d.RetryAfter, horizon)
		}
	})
	t.Run("invalid requests are refused and consume nothing", func(t *testing.T) {
		t.Parallel()
		subject := Subject(t)
		ctx := context.Background()
		valid := ratelimit.Request{PolicyID: p.ID(), SubjectDigest: subject, Cost: 1, Deadline: time.Now().Add(30 * time.Second)}
		for name, mutate := range map[string]func(*ratelimit.Request){
			"cost zero":          func(r *ratelimit.Request) { r.Cost = 0 },
			"cost above max":     func(r *ratelimit.Request) { r.Cost = p.MaxCost() + 1 },
			"no deadline":        func(r *ratelimit.Request) { r.Deadline = time.Time{} },
			"evaluation id":      func(r *ratelimit.Request) { r.EvaluationID = "e-1" },
			"malformed policyID": func(r *ratelimit.Request) { r.PolicyID = "Bad ID!" },
		} {
			r := valid
			mutate(&r)
			out := port.Evaluate(ctx, r)
			if out == nil || ratelimit.CategoryOf(out) != ratelimit.CategoryInvalidRequest || ratelimit.Admitted(out) {
				t.Errorf("%s: got %v, want Unavailable{invalid_request}", name, out)
			}
		}
		runSteps(t, port, p, subject, []step{{5, true, 0}})
	})
	t.Run("a passed deadline is Unavailable{deadline} and consumes nothing", func(t *testing.T) {
		t.Parallel()
		subject := Subject(t)
		out := port.Evaluate(context.Background(), ratelimit.Request{PolicyID: p.ID(), SubjectDigest: subject, Cost: 1, Deadline: time.Now().Add(-time.Second)})
		refused(t, out, ratelimit.KindUnavailable, ratelimit.CategoryDeadline)
		if u, ok := out.(ratelimit.Unavailable); ok && !errors.Is(u.Cause, ratelimit.ErrDeadlinePassed) {
			t.Errorf("cause %v does not wrap ErrDeadlinePassed", u.Cause)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		out = port.Evaluate(ctx, ratelimit.Request{PolicyID: p.ID(), SubjectDigest: subject, Cost: 1, Deadline: time.Now().Add(30 * time.Second)})
		refused(t, out, ratelimit.KindUnavailable, ratelimit.CategoryDeadline)
		runSteps(t, port, p, subject, []step{{5, true, 0}})
	})
	t.Run("unknown policy", func(t *testing.T) {
		t.Parallel()
		out := ask(port, "c-unknown", Subject(t), 1)
		refused(t, out, ratelimit.KindUnavailable, ratelimit.CategoryUnknownPolicy)
	})
	t.Run("a new revision starts from fresh state", func(t *testing.T) {
		t.Parallel()
		subject := Subject(t)
		runSteps(t, port, p, subject, []step{{5, true, 0}, {1, false, 0}})
		rev2 := newPort(t, Policies(t, 2))
		d := evaluated(t, ask(rev2, p.ID(), subject, 1), "revision 2")
		if !d.Allowed || d.Remaining != 4 || d.PolicyRevision != 2 {
			t.Errorf("revision 2: allowed %t remaining %d revision %d, want true 4 2", d.Allowed, d.Remaining, d.PolicyRevision)
		}
		runSteps(t, port, p, subject, []step{{1, false, 0}}) // revision 1 is untouched
	})
}
