package rateplan_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/rateplan"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// The port's tests need no server: the inner port records what it is
// asked and admits; the plan source is a table.

// recorder is an inner EdgePort that records every call and admits.
type recorder struct {
	mu      sync.Mutex
	reqs    []ratelimit.Request
	sets    []ratelimit.SetRequest
	refunds []ratelimit.Request
	rcpts   []ratelimit.Receipt
}

var _ ratelimit.EdgePort = (*recorder)(nil)

func allowed(id ratelimit.PolicyID) ratelimit.Outcome {
	return ratelimit.Evaluated{Decision: ratelimit.Decision{Allowed: true, Limit: 1, PolicyID: id}}
}

func (r *recorder) Evaluate(_ context.Context, req ratelimit.Request) ratelimit.Outcome {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reqs = append(r.reqs, req)
	return allowed(req.PolicyID)
}

func (r *recorder) EvaluateSet(_ context.Context, req ratelimit.SetRequest) ratelimit.Outcome {
	r.mu.Lock()
	defer r.mu.Unlock()
	req.Members = append([]ratelimit.PolicyID(nil), req.Members...) // what it was asked, not the caller's slice
	r.sets = append(r.sets, req)
	return allowed(req.Members[0])
}

func (r *recorder) Refund(_ context.Context, req ratelimit.Request, rc ratelimit.Receipt) ratelimit.Outcome {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.refunds = append(r.refunds, req)
	r.rcpts = append(r.rcpts, rc)
	return allowed(req.PolicyID)
}

func (r *recorder) calls() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.reqs) + len(r.sets) + len(r.refunds)
}

// source is a PlanSource over a table; err, when set, fails every lookup;
// block makes a lookup wait for its context.
type source struct {
	mu    sync.Mutex
	plans map[ratelimit.SubjectDigest]ratelimit.PlanID
	err   error
	block bool
	asked []ratelimit.SubjectDigest
}

var _ ratelimit.PlanSource = (*source)(nil)

func (s *source) PlanOf(ctx context.Context, subject ratelimit.SubjectDigest) (ratelimit.PlanID, error) {
	s.mu.Lock()
	s.asked = append(s.asked, subject)
	plan, err, block := s.plans[subject], s.err, s.block
	s.mu.Unlock()
	if block {
		<-ctx.Done()
		return "", ctx.Err()
	}
	return plan, err
}

func (s *source) lookups() []ratelimit.SubjectDigest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]ratelimit.SubjectDigest(nil), s.asked...)
}

type observed struct {
	plan ratelimit.PlanID
	base ratelimit.PolicyID
	kind ratelimit.OutcomeKind
}

// portFixture is a port over a recorder and a source, with the test's
// plans over fixed-window policies (gold maps api and search; free maps
// api only; other is mapped by no plan).
type portFixture struct {
	port *rateplan.Port
	in   *recorder
	src  *source
	mu   sync.Mutex
	obs  []observed
}

func newPortFixture(t *testing.T, plans map[ratelimit.SubjectDigest]ratelimit.PlanID) *portFixture {
	t.Helper()
	var pols []ratelimit.Policy
	for _, id := range []ratelimit.PolicyID{polAPI, polAPIFree, polAPIGold, polSearch, polSearchGold, polOther} {
		pols = append(pols, policy(t, id, ratelimit.FixedWindow{Limit: 10, Window: time.Second}))
	}
	f := &portFixture{in: &recorder{}, src: &source{plans: plans}}
	var err error
	f.port, err = rateplan.NewPort(f.in, plansOf(t, pols), f.src, func(plan ratelimit.PlanID, base ratelimit.PolicyID, out ratelimit.Outcome) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.obs = append(f.obs, observed{plan, base, out.Kind()})
	})
	require.NoError(t, err)
	return f
}

func (f *portFixture) observations() []observed {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]observed(nil), f.obs...)
}

// The subjects of the port's tests (valid digests).
const (
	subGold    ratelimit.SubjectDigest = "subject-gold-0001"
	subFree    ratelimit.SubjectDigest = "subject-free-0001"
	subNone    ratelimit.SubjectDigest = "subject-none-0001"
	subUnknown ratelimit.SubjectDigest = "subject-unkn-0001"
)

func assignments() map[ratelimit.SubjectDigest]ratelimit.PlanID {
	return map[ratelimit.SubjectDigest]ratelimit.PlanID{subGold: planGold, subFree: planFree, subUnknown: "platinum"}
}

func request(id ratelimit.PolicyID, subject ratelimit.SubjectDigest) ratelimit.Request {
	return ratelimit.Request{PolicyID: id, SubjectDigest: subject, Cost: 1, Deadline: time.Now().Add(time.Minute)}
}

// TestPortPassesUnmappedPolicies: a policy no plan maps passes as it is,
// in every operation, and no plan is looked up.
func TestPortPassesUnmappedPolicies(t *testing.T) {
	f := newPortFixture(t, assignments())
	ctx := context.Background()
	req := request(polOther, subGold)
	req.EvaluationID = "eval-1"
	require.True(t, ratelimit.Admitted(f.port.Evaluate(ctx, req)))
	set := ratelimit.SetRequest{Members: []ratelimit.PolicyID{polOther}, SubjectDigest: subGold, Cost: 2, Deadline: req.Deadline}
	require.True(t, ratelimit.Admitted(f.port.EvaluateSet(ctx, set)))
	rc := ratelimit.NewReceipt(polOther, 1, 1, 1000, ratelimit.GlobalRedis)
	require.True(t, ratelimit.Admitted(f.port.Refund(ctx, req, rc)))

	require.Equal(t, []ratelimit.Request{req}, f.in.reqs)
	require.Equal(t, []ratelimit.SetRequest{set}, f.in.sets)
	require.Equal(t, []ratelimit.Request{req}, f.in.refunds)
	require.Equal(t, []ratelimit.Receipt{rc}, f.in.rcpts)
	require.Empty(t, f.src.lookups())
	require.Empty(t, f.observations(), "only mapped requests are observed")
}

// TestPortDecidesByThePlan: a request of a mapped base is decided by the
// policy its subject's plan maps it to, everything else in it unchanged:
// the default plan's for no assignment or one naming a plan the file no
// longer has; the base itself for a plan that does not map it.
func TestPortDecidesByThePlan(t *testing.T) {
	for _, c := range []struct {
		base    ratelimit.PolicyID
		subject ratelimit.SubjectDigest
		want    ratelimit.PolicyID
		plan    ratelimit.PlanID
	}{
		{polAPI, subGold, polAPIGold, planGold},
		{polAPI, subFree, polAPIFree, planFree},
		{polAPI, subNone, polAPIFree, planFree},
		{polAPI, subUnknown, polAPIFree, planFree},
		{polSearch, subGold, polSearchGold, planGold},
		{polSearch, subFree, polSearch, planFree},
		{polSearch, subUnknown, polSearch, planFree},
	} {
		t.Run(string(c.base)+"/"+string(c.subject), func(t *testing.T) {
			f := newPortFixture(t, assignments())
			req := request(c.base, c.subject)
			req.Cost = 3
			out := f.port.Evaluate(context.Background(), req)
			require.True(t, ratelimit.Admitted(out))
			want := req
			want.PolicyID = c.want
			require.Equal(t, []ratelimit.Request{want}, f.in.reqs)
			require.Equal(t, []ratelimit.SubjectDigest{c.subject}, f.src.lookups())
			require.Equal(t, []observed{{c.plan, c.base, ratelimit.KindEvaluated}}, f.observations())
		})
	}
}

// TestPortUnavailableWithoutAPlan: a plan that cannot be read is
// Unavailable for the base policy, nothing is sent; a lookup cut by the
// request's deadline says deadline.
func TestPortUnavailableWithoutAPlan(t *testing.T) {
	errDown := errors.New("plan store down")
	ctx := context.Background()
	check := func(t *testing.T, out ratelimit.Outcome, cat ratelimit.Category, cause error) {
		t.Helper()
		u, ok := out.(ratelimit.Unavailable)
		require.True(t, ok, "outcome %#v", out)
		require.Equal(t, polAPI, u.PolicyID)
		require.Equal(t, cat, u.Category)
		require.ErrorIs(t, u.Cause, cause)
	}
	t.Run("error", func(t *testing.T) {
		f := newPortFixture(t, assignments())
		f.src.err = errDown
		check(t, f.port.Evaluate(ctx, request(polAPI, subGold)), ratelimit.CategoryConnection, errDown)
		set := ratelimit.SetRequest{Members: []ratelimit.PolicyID{polOther, polAPI}, SubjectDigest: subGold, Cost: 1, Deadline: time.Now().Add(time.Minute)}
		check(t, f.port.EvaluateSet(ctx, set), ratelimit.CategoryConnection, errDown)
		require.Zero(t, f.in.calls(), "nothing is sent without a plan")
		require.Equal(t, []observed{{"", polAPI, ratelimit.KindUnavailable}, {"", polAPI, ratelimit.KindUnavailable}}, f.observations())
	})
	t.Run("deadline", func(t *testing.T) {
		f := newPortFixture(t, assignments())
		f.src.block = true
		req := request(polAPI, subGold)
		req.Deadline = time.Now().Add(20 * time.Millisecond)
		check(t, f.port.Evaluate(ctx, req), ratelimit.CategoryDeadline, context.DeadlineExceeded)
		require.Zero(t, f.in.calls())
	})
}

// TestPortEvaluateSet: only the members some plan maps are rewritten, each
// by its own subject's plan; each distinct subject of a mapped member is
// looked up once, one only of unmapped members never; the caller's
// members are left as they were.
func TestPortEvaluateSet(t *testing.T) {
	ctx := context.Background()
	t.Run("subjects", func(t *testing.T) {
		f := newPortFixture(t, assignments())
		members := []ratelimit.PolicyID{polAPI, polSearch, polOther, polAPI, polSearch}
		set := ratelimit.SetRequest{
			Members:  members,
			Subjects: []ratelimit.SubjectDigest{subGold, subGold, subFree, subNone, subNone},
			Costs:    []int64{1, 2, 3, 4, 5}, Deadline: time.Now().Add(time.Minute),
		}
		require.True(t, ratelimit.Admitted(f.port.EvaluateSet(ctx, set)))
		want := set
		want.Members = []ratelimit.PolicyID{polAPIGold, polSearchGold, polOther, polAPIFree, polSearch}
		require.Equal(t, []ratelimit.SetRequest{want}, f.in.sets)
		require.Equal(t, []ratelimit.PolicyID{polAPI, polSearch, polOther, polAPI, polSearch}, members, "the caller's members changed")
		require.Equal(t, []ratelimit.SubjectDigest{subGold, subNone}, f.src.lookups())
		require.Equal(t, []observed{{planGold, polAPI, ratelimit.KindEvaluated}}, f.observations())
	})
	t.Run("shared subject", func(t *testing.T) {
		f := newPortFixture(t, assignments())
		set := ratelimit.SetRequest{Members: []ratelimit.PolicyID{polOther, polSearch, polAPI}, SubjectDigest: subGold, Cost: 1, Deadline: time.Now().Add(time.Minute)}
		require.True(t, ratelimit.Admitted(f.port.EvaluateSet(ctx, set)))
		require.Equal(t, []ratelimit.PolicyID{polOther, polSearchGold, polAPIGold}, f.in.sets[0].Members)
		require.Equal(t, []ratelimit.SubjectDigest{subGold}, f.src.lookups())
	})
}

// TestPortRefund: a refund goes to the receipt's policy when that is one
// of the base's plan policies (the subject's plan may have changed since
// the admission); otherwise the request passes as it is, for the inner
// port to refuse a foreign receipt. No plan is looked up.
func TestPortRefund(t *testing.T) {
	for _, c := range []struct {
		base, receipt, want ratelimit.PolicyID
	}{
		{polAPI, polAPIGold, polAPIGold},
		{polAPI, polAPIFree, polAPIFree},
		{polSearch, polSearch, polSearch},
		{polSearch, polSearchGold, polSearchGold},
		{polAPI, polSearchGold, polAPI}, // another base's family
		{polAPI, polOther, polAPI},
		{polOther, polAPIGold, polOther}, // an unmapped request
	} {
		t.Run(string(c.base)+"/"+string(c.receipt), func(t *testing.T) {
			f := newPortFixture(t, assignments())
			req := request(c.base, subFree)
			rc := ratelimit.NewReceipt(c.receipt, 1, 1, 1000, ratelimit.GlobalRedis)
			require.True(t, ratelimit.Admitted(f.port.Refund(context.Background(), req, rc)))
			want := req
			want.PolicyID = c.want
			require.Equal(t, []ratelimit.Request{want}, f.in.refunds)
			require.Equal(t, []ratelimit.Receipt{rc}, f.in.rcpts)
			require.Empty(t, f.src.lookups())
		})
	}
}

// TestPortRequestDoesNotChooseThePlan: nothing a client sends (evaluation
// ID, cost, deadline, a subject digest that spells a plan or a policy)
// changes the plan: a subject without an assignment is decided by the
// default plan's policy, and the source is asked about the digest only.
func TestPortRequestDoesNotChooseThePlan(t *testing.T) {
	subjects := []ratelimit.SubjectDigest{"goldgoldgoldgold", "plan-gold-api-gold", "api-gold-api-gold-api-gold"}
	f := newPortFixture(t, map[ratelimit.SubjectDigest]ratelimit.PlanID{})
	ctx := context.Background()
	for _, s := range subjects {
		for _, id := range []ratelimit.EvaluationID{"", "gold", "api-gold", "plan.gold"} {
			for _, cost := range []int64{1, 7} {
				for _, d := range []time.Duration{time.Second, time.Minute} {
					req := ratelimit.Request{PolicyID: polAPI, SubjectDigest: s, Cost: cost, EvaluationID: id, Deadline: time.Now().Add(d)}
					require.True(t, ratelimit.Admitted(f.port.Evaluate(ctx, req)))
				}
			}
		}
	}
	require.NotEmpty(t, f.in.reqs)
	for i, req := range f.in.reqs {
		assert.Equal(t, polAPIFree, req.PolicyID, "request %d", i)
	}
	asked := f.src.lookups()
	require.Len(t, asked, len(f.in.reqs))
	for _, s := range asked {
		assert.Contains(t, subjects, s)
	}
	for _, o := range f.observations() {
		assert.Equal(t, planFree, o.plan)
	}
}
