package redisrate

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/programs"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// servicePoolSize is APP_RATE_LIMIT_POOL_SIZE's default (app-bootstrap/config).
const servicePoolSize = 64

// TestLostReplyRetryAfterDialFailures is issue 33, hypothesis (a):
// go-redis counts every failed dial of a pool over its whole life; a
// successful dial never resets the count, only go-redis's background probe
// does, which it starts when the count reaches PoolSize and which dials
// once a second. Here a history of outages at the test's proxy (each
// refusing a few dials, as an instance sees before its breaker opens, then
// a recovery and a successful dial) brings the count to PoolSize during a
// last short refusal of new connections. The server then accepts again,
// and the one pooled connection carries a dedup call whose reply is lost
// with the connection closed: its retry needs a new connection, must get
// one from the healthy server, and answer the real decision, charged once
// (ADR 0017). At the shipped defaults.
func TestLostReplyRetryAfterDialFailures(t *testing.T) {
	srv := redistest.Start(t)
	proxy := redistest.StartProxy(t, srv.Addr())
	var dials, failures atomic.Int64
	var d net.Dialer
	cfg := ClientConfig{
		Addr: proxy.Addr(), Protocol: ProtocolRESP2,
		CommandTimeout: DefaultCommandTimeout, DialTimeout: DefaultDialTimeout,
		PoolSize: servicePoolSize, PoolTimeout: DefaultCommandTimeout,
		Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
			dials.Add(1)
			c, err := d.DialContext(ctx, network, addr)
			if err != nil {
				failures.Add(1)
			}
			return c, err
		},
	}
	client, err := NewClient(cfg)
	require.NoError(t, err)
	pol := mustPolicy(t, ratelimit.PolicySpec{ID: "orders", Params: ratelimit.TokenBucket{Capacity: 5, RefillTokens: 1, RefillPeriod: time.Hour},
		MaxCost: 1, MaxClockRegression: 2 * time.Second, DedupWindow: 10 * time.Minute})
	p, err := New(client, randomKeys(t), []ratelimit.Policy{pol}, Options{
		CommandTimeout: DefaultCommandTimeout, MaxInFlight: servicePoolSize, PipelineMaxBatch: 16,
		Breaker: BreakerOptions{Threshold: DefaultBreakerThreshold, ProbeInterval: DefaultBreakerProbeInterval},
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, p.Start(ctx))
	bundle, err := programs.ForPolicy(pol)
	require.NoError(t, err)
	dedup := bundle.Dedup // the policy's bound dedup program, what is sent
	subject := randomSubject(t)
	evaluate := func(id ratelimit.EvaluationID) ratelimit.Outcome {
		return p.Evaluate(context.Background(), ratelimit.Request{PolicyID: "orders", SubjectDigest: subject, Cost: 1, EvaluationID: id,
			Deadline: time.Now().Add(EvaluationTimeout(DefaultCommandTimeout, true))})
	}

	// Outages, each with a few refused dials (PINGs: no breaker in the
	// way) and a recovery with a successful dial, while the failures so far
	// stay below PoolSize.
	const perOutage = 7
	for range servicePoolSize {
		if failures.Load()+perOutage >= servicePoolSize {
			break
		}
		proxy.Refuse()
		for range perOutage {
			_ = client.Ping(ctx).Err() // a refused dial (or a dropped connection)
		}
		require.NoError(t, proxy.Accept())
		require.NoError(t, client.Ping(ctx).Err(), "recovered")
	}
	// A last short fault: new connections refused while one is held, until
	// the failures reach PoolSize.
	held := client.Conn()
	require.NoError(t, held.Ping(ctx).Err())
	proxy.RefuseNew()
	for range servicePoolSize {
		if failures.Load() >= servicePoolSize {
			break
		}
		require.Error(t, client.Ping(ctx).Err(), "new connections are refused")
	}
	// go-redis's probe, once its count reaches PoolSize, dials at once: let
	// it meet the refusal too (at most 2 s; without that probe none comes).
	n := dials.Load()
	for end := time.Now().Add(2 * time.Second); dials.Load() == n && time.Now().Before(end); {
		time.Sleep(5 * time.Millisecond)
	}
	require.NoError(t, proxy.Accept())
	require.NoError(t, held.Close()) // back to the pool: its one idle connection
	require.Equal(t, uint32(1), client.PoolStats().IdleConns, "the pool holds one connection")

	first := evaluate("")
	require.True(t, ratelimit.Admitted(first), "the server decides on the pooled connection: %v", first)
	left := first.(ratelimit.Evaluated).Decision.Remaining

	proxy.LoseNextReplyTo(redistest.LoseAndClose, dedup.SHA1)
	out := evaluate("order-1")
	proxy.Disarm()
	require.Equal(t, int64(1), proxy.Lost(), "the reply of the dedup call was lost")
	decided, failed := p.DedupRetries()
	require.True(t, ratelimit.Admitted(out), "the retry answers the real decision: %v (retries decided %d, failed %d, failures by what the retry got %v; %d dials failed in all)",
		out, decided, failed, p.DedupRetryFailures(), failures.Load())
	require.Equal(t, left-1, out.(ratelimit.Evaluated).Decision.Remaining, "the real decision")
	next := evaluate("")
	require.True(t, ratelimit.Admitted(next), "%v", next)
	require.Equal(t, left-2, next.(ratelimit.Evaluated).Decision.Remaining, "charged once")
}
