package redisrate

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/programs"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit/ratelimittest"
)

// The EdgePort conformance kit (shared-contract/ratelimit/ratelimittest)
// runs against the Redis provider (service lane, service_test.go) and
// against modelPort, the programs' Go reference model behind the same
// interface.

// conformancePolicies is the kit's policies: one per algorithm, limit 5,
// hour-long windows, at revision rev.
func conformancePolicies(t testing.TB, rev int64) []ratelimit.Policy {
	return ratelimittest.Policies(t, rev)
}

// randomSubject returns a fresh subject digest: a random key per test.
func randomSubject(t testing.TB) ratelimit.SubjectDigest { return ratelimittest.Subject(t) }

func ask(port ratelimit.EdgePort, id ratelimit.PolicyID, subject ratelimit.SubjectDigest, cost int64) ratelimit.Outcome {
	return port.Evaluate(context.Background(), ratelimit.Request{PolicyID: id, SubjectDigest: subject, Cost: cost, Deadline: time.Now().Add(30 * time.Second)})
}

// modelPort is the reference EdgePort: programs.Evaluate over in-memory
// states keyed like the provider's, on the local clock.
type modelPort struct {
	ratelimittest.Fake // sets and refunds: the zero Fake's refusals (Run decides single requests)
	policies           map[ratelimit.PolicyID]ratelimit.Policy
	store              *modelStore
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
	if ctx.Err() != nil || !req.Deadline.After(now) {
		return ratelimit.Unavailable{PolicyID: req.PolicyID, Category: ratelimit.CategoryDeadline, Cause: ratelimit.ErrDeadlinePassed}
	}
	key := fmt.Sprintf("%s/%d/%v/%s", p.ID(), p.Revision(), p.Algorithm(), string(req.SubjectDigest))
	m.store.mu.Lock()
	r, next := programs.Evaluate(p, m.store.states[key], now.UnixMilli(), req.Cost)
	m.store.states[key] = next
	m.store.mu.Unlock()
	retry, delay := r.Waits()
	switch r.Status {
	case programs.StatusAllowed, programs.StatusDenied:
		return ratelimit.Evaluated{Decision: ratelimit.Decision{
			Allowed: r.Status == programs.StatusAllowed, Limit: r.Limit, Remaining: r.Remaining,
			RetryAfter: retry, Delay: delay, ResetAt: time.UnixMilli(r.ResetAtMillis), ServerNow: time.UnixMilli(r.ServerNowMillis),
			PolicyID: p.ID(), PolicyRevision: p.Revision(), Source: ratelimit.GlobalRedis, Certainty: p.Certainty(),
		}}
	}
	return ratelimit.Incompatible{PolicyID: p.ID(), Category: ratelimit.CategoryStateIncompatible}
}

func TestConformanceModel(t *testing.T) {
	store := &modelStore{states: map[string]programs.State{}}
	ratelimittest.Run(t, func(t *testing.T, policies []ratelimit.Policy) ratelimit.EdgePort {
		m := &modelPort{policies: map[ratelimit.PolicyID]ratelimit.Policy{}, store: store}
		for _, p := range policies {
			m.policies[p.ID()] = p
		}
		return m
	})
}
