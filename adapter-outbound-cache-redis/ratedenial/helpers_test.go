package ratedenial_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/programs"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/ratedenial"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redisrate"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
	"github.com/tech-log/tech-log-backend/shared-contract/keyspace"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit/ratelimittest"
)

func randomKeys(t testing.TB) *keyspace.Builder {
	t.Helper()
	b := make([]byte, 6)
	_, err := rand.Read(b)
	require.NoError(t, err)
	secret, err := keyspace.NewSecret([]byte("denial-cache-lane-secret-0123456789abcdef"))
	require.NoError(t, err)
	keys, err := keyspace.NewBuilder("d"+hex.EncodeToString(b), secret)
	require.NoError(t, err)
	return keys
}

func randomSubject(t testing.TB) ratelimit.SubjectDigest {
	t.Helper()
	b := make([]byte, 16)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return ratelimit.SubjectDigest(hex.EncodeToString(b))
}

// policy is a fail-closed policy with maxCost.
func policy(t testing.TB, id ratelimit.PolicyID, rev int64, params ratelimit.Params, maxCost int64) ratelimit.Policy {
	t.Helper()
	p, err := ratelimit.NewPolicy(ratelimit.PolicySpec{ID: id, Revision: rev, Algorithm: params.Algorithm(), Params: params, MaxCost: maxCost,
		CleanupGrace: time.Minute, MaxClockRegression: 2 * time.Second, FailurePolicy: ratelimit.FailClosed})
	require.NoError(t, err)
	return p
}

// client is a coordination client for srv (closed at cleanup).
func client(t testing.TB, srv *redistest.Server) *redis.Client {
	t.Helper()
	c, err := redisrate.NewClient(redisrate.ClientConfig{
		Addr: srv.Addr(), Protocol: redisrate.ProtocolRESP2, CommandTimeout: redisrate.DefaultCommandTimeout,
		DialTimeout: redisrate.DefaultDialTimeout, PoolSize: 8, PoolTimeout: redisrate.DefaultCommandTimeout,
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// provider builds and starts a provider over c (closed at cleanup).
func provider(t testing.TB, c *redis.Client, keys *keyspace.Builder, pols []ratelimit.Policy) *redisrate.Provider {
	t.Helper()
	p, err := redisrate.New(c, keys, pols, redisrate.Options{CommandTimeout: redisrate.DefaultCommandTimeout, MaxInFlight: 8})
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, p.Start(ctx))
	return p
}

// cache builds the cache over inner (closed at cleanup).
func cache(t testing.TB, inner ratelimit.EdgePort, opts ratedenial.Options) *ratedenial.Cache {
	t.Helper()
	c, err := ratedenial.New(inner, opts)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	require.NoError(t, c.Start(context.Background()))
	return c
}

func ask(p ratelimit.EdgePort, id ratelimit.PolicyID, subject ratelimit.SubjectDigest, cost int64) ratelimit.Outcome {
	return p.Evaluate(context.Background(), ratelimit.Request{PolicyID: id, SubjectDigest: subject, Cost: cost,
		Deadline: time.Now().Add(time.Minute)})
}

// clock is the kit's controlled local clock.
type clock = ratelimittest.Clock

// modelServer is an EdgePort over the programs' Go model whose server
// clock is the local clock plus the latency of the call (drawn by
// latency), floored to whole milliseconds as the programs floor TIME.
type modelServer struct {
	ratelimittest.Fake // sets and refunds: the zero Fake's refusals
	mu                 sync.Mutex
	clock              *clock
	latency            func() time.Duration
	pols               map[ratelimit.PolicyID]ratelimit.Policy
	state              map[string]programs.State
	calls              int
}

func newModelServer(c *clock, latency func() time.Duration, pols ...ratelimit.Policy) *modelServer {
	m := &modelServer{clock: c, latency: latency, pols: map[ratelimit.PolicyID]ratelimit.Policy{}, state: map[string]programs.State{}}
	for _, p := range pols {
		m.pols[p.ID()] = p
	}
	return m
}

func (m *modelServer) Evaluate(_ context.Context, req ratelimit.Request) ratelimit.Outcome {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls++
	p := m.pols[req.PolicyID]
	k := string(req.PolicyID) + "/" + string(req.SubjectDigest)
	// The server's TIME to the microsecond (GCRA decides on it; the other
	// algorithms on its millisecond).
	serverNow := m.clock.Now().Add(m.latency()).UnixMicro()
	r, next := programs.EvaluateMicros(p, m.state[k], serverNow, req.Cost)
	if r.Status == programs.StatusAllowed {
		m.state[k] = next
	}
	return ratelimit.Evaluated{Decision: ratelimit.Decision{
		Allowed: r.Status == programs.StatusAllowed, Limit: r.Limit, Remaining: r.Remaining,
		RetryAfter: time.Duration(r.RetryAfterMillis) * time.Millisecond, ResetAt: time.UnixMilli(r.ResetAtMillis),
		ServerNow: time.UnixMilli(r.ServerNowMillis), PolicyID: p.ID(), PolicyRevision: p.Revision(),
		Source: ratelimit.GlobalRedis, Certainty: p.Certainty(),
	}}
}

// wouldAllow is what the server would answer req at local instant at
// (no latency), without changing anything.
func (m *modelServer) wouldAllow(req ratelimit.Request, at time.Time) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := string(req.PolicyID) + "/" + string(req.SubjectDigest)
	r, _ := programs.EvaluateMicros(m.pols[req.PolicyID], m.state[k], at.UnixMicro(), req.Cost)
	return r.Status == programs.StatusAllowed
}
