package redisrate

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/programs"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// The EdgePort conformance suite: behaviour every rate-limit EdgePort must
// show, run against the Redis provider (service lane) and against modelPort,
// the programs' Go reference model behind the same interface. Windows and
// refill periods are an hour long so that the real clock the Redis server
// reads cannot change a decision while a case runs.

// conformancePolicies is one policy per algorithm, limit 5, at revision rev.
func conformancePolicies(t testing.TB, rev int64) []ratelimit.Policy {
	spec := func(id ratelimit.PolicyID, params ratelimit.Params) ratelimit.PolicySpec {
		return ratelimit.PolicySpec{ID: id, Revision: rev, Params: params, MaxCost: 5, MaxClockRegression: 2 * time.Second}
	}
	return []ratelimit.Policy{
		mustPolicy(t, spec("c-fixed", ratelimit.FixedWindow{Limit: 5, Window: time.Hour})),
		mustPolicy(t, spec("c-sliding", ratelimit.SlidingWindowCounter{Limit: 5, Window: time.Hour})),
		mustPolicy(t, spec("c-bucket", ratelimit.TokenBucket{Capacity: 5, RefillTokens: 1, RefillPeriod: time.Hour})),
	}
}

// portFactory builds an EdgePort for policies; every call for the same
// suite run shares one backing store, so that a second port sees the state
// the first left.
type portFactory func(t *testing.T, policies []ratelimit.Policy) ratelimit.EdgePort

// randomSubject returns a fresh subject digest: a random key per test.
func randomSubject(t testing.TB) ratelimit.SubjectDigest {
	b := make([]byte, 18)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return ratelimit.SubjectDigest(base64.RawURLEncoding.EncodeToString(b))
}

func ask(port ratelimit.EdgePort, id ratelimit.PolicyID, subject ratelimit.SubjectDigest, cost int64) ratelimit.Outcome {
	return port.Evaluate(context.Background(), ratelimit.Request{PolicyID: id, SubjectDigest: subject, Cost: cost, Deadline: time.Now().Add(30 * time.Second)})
}

// step is one request of a sequence and the decision it must get.
type step struct {
	cost      int64
	allowed   bool
	remaining int64
}

func runSteps(t *testing.T, port ratelimit.EdgePort, p ratelimit.Policy, subject ratelimit.SubjectDigest, steps []step) {
	t.Helper()
	for i, s := range steps {
		out := ask(port, p.ID(), subject, s.cost)
		e, ok := out.(ratelimit.Evaluated)
		require.True(t, ok, "step %d: %v", i, out)
		d := e.Decision
		assert.Equal(t, s.allowed, d.Allowed, "step %d allowed", i)
		assert.Equal(t, s.remaining, d.Remaining, "step %d remaining", i)
		assert.Equal(t, s.allowed, ratelimit.Admitted(out))
	}
}

func runConformance(t *testing.T, newPort portFactory) {
	for _, p := range conformancePolicies(t, 1) {
		t.Run(p.Algorithm().String(), func(t *testing.T) {
			t.Parallel()
			port := newPort(t, conformancePolicies(t, 1))

			t.Run("admits up to the limit then denies", func(t *testing.T) {
				t.Parallel()
				runSteps(t, port, p, randomSubject(t), []step{
					{1, true, 4}, {1, true, 3}, {1, true, 2}, {1, true, 1}, {1, true, 0},
					{1, false, 0}, {1, false, 0},
				})
			})
			t.Run("a denial consumes nothing", func(t *testing.T) {
				t.Parallel()
				runSteps(t, port, p, randomSubject(t), []step{
					{3, true, 2}, {3, false, 2}, {5, false, 2}, {2, true, 0}, {1, false, 0},
				})
			})
			t.Run("exact boundary after a denial", func(t *testing.T) {
				t.Parallel()
				runSteps(t, port, p, randomSubject(t), []step{
					{4, true, 1}, {2, false, 1}, {1, true, 0},
				})
			})
			t.Run("subjects are independent", func(t *testing.T) {
				t.Parallel()
				a, b := randomSubject(t), randomSubject(t)
				runSteps(t, port, p, a, []step{{5, true, 0}, {1, false, 0}})
				runSteps(t, port, p, b, []step{{1, true, 4}})
			})
			t.Run("decision fields", func(t *testing.T) {
				t.Parallel()
				subject := randomSubject(t)
				before := time.Now()
				out := ask(port, p.ID(), subject, 2)
				e, ok := out.(ratelimit.Evaluated)
				require.True(t, ok, "%v", out)
				d := e.Decision
				assert.True(t, d.Allowed)
				assert.Equal(t, int64(5), d.Limit)
				assert.Equal(t, p.ID(), d.PolicyID)
				assert.Equal(t, int64(1), d.PolicyRevision)
				assert.Equal(t, ratelimit.GlobalRedis, d.Source)
				assert.Equal(t, p.Certainty(), d.Certainty)
				assert.Zero(t, d.RetryAfter)
				assert.True(t, d.ResetAt.After(before.Add(-time.Second)), "reset %v after now %v", d.ResetAt, before)
				assert.True(t, d.ResetAt.Before(before.Add(2*time.Hour+time.Minute)), "reset within the policy horizon")
				wait, known := d.ResetAfter()
				require.True(t, known, "the decision carries the server's now")
				assert.Positive(t, wait, "ResetAt lies after the server's now")
				assert.LessOrEqual(t, wait, 2*time.Hour, "reset within the policy horizon, on the server's clock alone")

				out = ask(port, p.ID(), subject, 4)
				e, ok = out.(ratelimit.Evaluated)
				require.True(t, ok, "%v", out)
				assert.False(t, e.Decision.Allowed)
				assert.Positive(t, e.Decision.RetryAfter)
				assert.LessOrEqual(t, e.Decision.RetryAfter, 2*time.Hour)
			})
			t.Run("cost above max cost is refused unsent and consumes nothing", func(t *testing.T) {
				t.Parallel()
				subject := randomSubject(t)
				out := ask(port, p.ID(), subject, 6)
				assert.Equal(t, ratelimit.KindUnavailable, out.Kind())
				assert.Equal(t, ratelimit.CategoryInvalidRequest, ratelimit.CategoryOf(out))
				runSteps(t, port, p, subject, []step{{5, true, 0}})
			})
			t.Run("unknown policy", func(t *testing.T) {
				t.Parallel()
				out := ask(port, "c-unknown", randomSubject(t), 1)
				assert.Equal(t, ratelimit.CategoryUnknownPolicy, ratelimit.CategoryOf(out))
				assert.False(t, ratelimit.Admitted(out))
			})
			t.Run("a new revision starts from fresh state", func(t *testing.T) {
				t.Parallel()
				subject := randomSubject(t)
				runSteps(t, port, p, subject, []step{{5, true, 0}, {1, false, 0}})
				rev2 := newPort(t, conformancePolicies(t, 2))
				out := ask(rev2, p.ID(), subject, 1)
				e, ok := out.(ratelimit.Evaluated)
				require.True(t, ok, "%v", out)
				assert.True(t, e.Decision.Allowed)
				assert.Equal(t, int64(4), e.Decision.Remaining)
				assert.Equal(t, int64(2), e.Decision.PolicyRevision)
				runSteps(t, port, p, subject, []step{{1, false, 0}}) // revision 1 is untouched
			})
		})
	}
}

// modelPort is the reference EdgePort: programs.Evaluate over in-memory
// states keyed like the provider's, on the local clock.
type modelPort struct {
	policies map[ratelimit.PolicyID]ratelimit.Policy
	store    *modelStore
}

type modelStore struct {
	mu     sync.Mutex
	states map[string]programs.State
}

var _ ratelimit.EdgePort = (*modelPort)(nil)

func (m *modelPort) Evaluate(ctx context.Context, req ratelimit.Request) ratelimit.Outcome {
	now := time.Now()
	if err := req.Validate(); err != nil {
		return ratelimit.Unavailable{Category: ratelimit.CategoryInvalidRequest, Cause: err}
	}
	p, ok := m.policies[req.PolicyID]
	if !ok {
		return ratelimit.Unavailable{PolicyID: req.PolicyID, Category: ratelimit.CategoryUnknownPolicy}
	}
	if err := req.ValidateFor(p); err != nil {
		return ratelimit.Unavailable{PolicyID: req.PolicyID, Category: ratelimit.CategoryInvalidRequest, Cause: err}
	}
	if !req.Deadline.After(now) {
		return ratelimit.Unavailable{PolicyID: req.PolicyID, Category: ratelimit.CategoryDeadline, Cause: ratelimit.ErrDeadlinePassed}
	}
	key := fmt.Sprintf("%s/%d/%v/%s", p.ID(), p.Revision(), p.Algorithm(), string(req.SubjectDigest))
	m.store.mu.Lock()
	r, next := programs.Evaluate(p, m.store.states[key], now.UnixMilli(), req.Cost)
	m.store.states[key] = next
	m.store.mu.Unlock()
	switch r.Status {
	case programs.StatusAllowed, programs.StatusDenied:
		return ratelimit.Evaluated{Decision: ratelimit.Decision{
			Allowed: r.Status == programs.StatusAllowed, Limit: r.Limit, Remaining: r.Remaining,
			RetryAfter: millis(r.RetryAfterMillis), ResetAt: time.UnixMilli(r.ResetAtMillis), ServerNow: time.UnixMilli(r.ServerNowMillis),
			PolicyID: p.ID(), PolicyRevision: p.Revision(), Source: ratelimit.GlobalRedis, Certainty: p.Certainty(),
		}}
	}
	return ratelimit.Incompatible{PolicyID: p.ID(), Category: ratelimit.CategoryStateIncompatible}
}

func TestConformanceModel(t *testing.T) {
	store := &modelStore{states: map[string]programs.State{}}
	runConformance(t, func(t *testing.T, policies []ratelimit.Policy) ratelimit.EdgePort {
		m := &modelPort{policies: map[ratelimit.PolicyID]ratelimit.Policy{}, store: store}
		for _, p := range policies {
			m.policies[p.ID()] = p
		}
		return m
	})
}
