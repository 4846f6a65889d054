package ratelease

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/internal/changetest"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redisrate"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
	"github.com/tech-log/tech-log-backend/shared-contract/keyspace"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// leasedPolicy is a fail-closed fixed window of limit per window with a
// lease of share and ttl.
func leasedPolicy(t testing.TB, params ratelimit.Params, share float64, ttl time.Duration) ratelimit.Policy {
	t.Helper()
	p, err := ratelimit.NewPolicy(ratelimit.PolicySpec{ID: "hot", Revision: 1, Algorithm: params.Algorithm(), Params: params, MaxCost: 1,
		CleanupGrace: time.Minute, MaxClockRegression: 2 * time.Second, FailurePolicy: ratelimit.FailClosed,
		Lease: &ratelimit.Lease{MaxShare: share, TTL: ttl}})
	require.NoError(t, err)
	return p
}

// provider builds and starts a provider on its own client to srv (both
// closed at cleanup): one instance.
func provider(t testing.TB, srv *redistest.Server, keys *keyspace.Builder, pols []ratelimit.Policy) *redisrate.Provider {
	t.Helper()
	return changetest.Provider(t, changetest.ClientAt(t, srv.Addr()), keys, pols...)
}

// counting counts the decisions it passes on.
type counting struct {
	ratelimit.EdgePort
	calls atomic.Int64
}

func (c *counting) Evaluate(ctx context.Context, req ratelimit.Request) ratelimit.Outcome {
	c.calls.Add(1)
	return c.EdgePort.Evaluate(ctx, req)
}

// newLeaser is a leaser over inner with the edge's timeout (closed at
// cleanup).
func newLeaser(t testing.TB, inner ratelimit.EdgePort, pols []ratelimit.Policy) *Leaser {
	t.Helper()
	l, err := New(inner, Options{Policies: pols, Timeout: time.Second})
	require.NoError(t, err)
	t.Cleanup(l.Close)
	return l
}

func request(p ratelimit.Policy, s ratelimit.SubjectDigest) ratelimit.Request {
	return ratelimit.Request{PolicyID: p.ID(), SubjectDigest: s, Cost: 1, Deadline: time.Now().Add(time.Second)}
}

func admitted(out ratelimit.Outcome) bool { return ratelimit.Admitted(out) }
