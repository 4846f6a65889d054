package redisrate

// Pipelined program calls on real servers: a cluster (batches per primary)
// and a primary with a replica (one WAIT behind each batch).

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// TestClusterPipelinedNeverAboveLimit: two providers with batching on (one
// turn per primary, up to 64 calls per batch) and 64 workers each on 8 hot
// subjects spread over the primaries: every call decided (10 s timeouts:
// the lane allows no failure), exactly the limit per subject, calls =
// requests, and batches were written.
func TestClusterPipelinedNeverAboveLimit(t *testing.T) {
	c := redistest.StartCluster(t)
	keys := randomKeys(t)
	const limit, subjects, providers, workers, perWorker = 40, 8, 2, 64, 4
	pol := fixedPolicy(t, "hot", limit, time.Hour)
	var ps []*Provider
	for range providers {
		cfg := clusterConfig()
		cfg.PoolSize = workers
		cfg.CommandTimeout, cfg.DialTimeout, cfg.PoolTimeout = noFaultTimeout, noFaultTimeout, noFaultTimeout
		cc, err := NewClusterClient(cfg, c.Addrs())
		require.NoError(t, err)
		p, err := New(cc, keys, []ratelimit.Policy{pol}, Options{CommandTimeout: cfg.CommandTimeout, MaxInFlight: workers, PipelineMaxBatch: workers})
		require.NoError(t, err)
		t.Cleanup(func() { _ = p.Close() })
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		require.NoError(t, p.Start(ctx))
		cancel()
		ps = append(ps, p)
	}
	subs := make([]ratelimit.SubjectDigest, subjects)
	for i := range subs {
		subs[i] = randomSubject(t)
	}
	c.ResetStats()
	admitted, other := hotSubjectLoad(t, ps, pol.ID(), subs, workers, perWorker)
	total := providers * workers * perWorker
	assertHotSubjectLimits(t, c, subs, admitted, other, limit, total)
	var batches, batched int64
	for _, p := range ps {
		st := p.PipelineStats()
		batches += st.Batches
		batched += st.Calls
	}
	assert.Positive(t, batches, "calls that met a busy turn were batched")
	t.Logf("%d requests: %d batches carried %d calls", total, batches, batched)
}

// TestReplicationAcksPipelined: with acks and batching on, one WAIT follows
// each write (a lone call or a batch) and covers every command of a batch:
// WAIT calls = lone calls + batches; each outcome is an acknowledged
// admission or Indeterminate{replication}.
func TestReplicationAcksPipelined(t *testing.T) {
	primary, _ := replicatedPair(t)
	keys := randomKeys(t)
	pol := fixedPolicy(t, "acks", 5, time.Hour)
	cfg := serviceConfig(primary)
	cfg.CommandTimeout, cfg.PoolTimeout = 3*time.Second, time.Second
	client, err := NewClient(cfg)
	require.NoError(t, err)
	p, err := New(client, keys, []ratelimit.Policy{pol}, Options{
		CommandTimeout: cfg.CommandTimeout, MaxInFlight: cfg.PoolSize, PipelineMaxBatch: cfg.PoolSize,
		ReplicationAcks: 1, ReplicationAckTimeout: 500 * time.Millisecond,
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, p.Start(ctx))
	require.NoError(t, primary.Client().ConfigResetStat(redistest.AdminCtx(t)).Err())

	n := cfg.PoolSize // = MaxInFlight: no admission refusals
	outs := make([]ratelimit.Outcome, n)
	var wg sync.WaitGroup
	for i := range outs {
		wg.Add(1)
		go func() { defer wg.Done(); outs[i] = ask(p, pol.ID(), randomSubject(t), 1) }()
	}
	wg.Wait()
	for _, out := range outs {
		if !ratelimit.Admitted(out) {
			require.Equal(t, ratelimit.CategoryReplication, ratelimit.CategoryOf(out), "%v", out)
		}
	}
	st := p.PipelineStats()
	assert.Equal(t, n, commandCalls(t, primary.Client(), "evalsha"))
	assert.Equal(t, n-int(st.Calls)+int(st.Batches), commandCalls(t, primary.Client(), "wait"), "one WAIT per write")
	t.Logf("%d calls: %d batches carried %d", n, st.Batches, st.Calls)
}
