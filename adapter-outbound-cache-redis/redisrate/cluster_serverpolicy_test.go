package redisrate

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// checkedClusterProvider builds (not starts) a Provider with server-policy
// checks on the cluster at addrs.
func checkedClusterProvider(t *testing.T, addrs []string, pol ratelimit.Policy, checks ServerChecks) *Provider {
	t.Helper()
	cfg := clusterConfig()
	cc, err := NewClusterClient(cfg, addrs)
	require.NoError(t, err)
	p, err := New(cc, randomKeys(t), []ratelimit.Policy{pol}, Options{CommandTimeout: cfg.CommandTimeout, MaxInFlight: cfg.PoolSize, ServerChecks: &checks})
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// TestClusterServerChecksRefuseEvictingPrimaries: a cluster whose primaries
// run allkeys-lru is refused at Start with ErrEvictionPolicy, exactly as a
// standalone server, and no program call is made; AllowEviction accepts it
// and the status says so.
func TestClusterServerChecksRefuseEvictingPrimaries(t *testing.T) {
	c := redistest.StartCluster(t, redistest.WithReplicasPerPrimary(0), redistest.WithNodeConfig("maxmemory-policy", "allkeys-lru"))
	pol := fixedPolicy(t, "evicting", 10, time.Hour)

	p := checkedClusterProvider(t, c.Addrs(), pol, ServerChecks{})
	err := p.Start(redistest.AdminCtx(t))
	require.ErrorIs(t, err, ErrEvictionPolicy)
	assert.Contains(t, err.Error(), "allkeys-lru")
	require.ErrorIs(t, p.Ready(redistest.AdminCtx(t)), ErrEvictionPolicy)
	c.ResetStats()
	out, ok := ask(p, pol.ID(), randomSubject(t), 1).(ratelimit.Unavailable)
	require.True(t, ok, "a refused primary is sent no program call: %v", out)
	assert.Equal(t, ratelimit.CategoryServerRejected, out.Category)
	assert.ErrorIs(t, out.Cause, ErrEvictionPolicy)
	assert.Zero(t, programCalls(c))

	accepted := checkedClusterProvider(t, c.Addrs(), pol, ServerChecks{AllowEviction: true})
	require.NoError(t, accepted.Start(redistest.AdminCtx(t)))
	require.NoError(t, accepted.Ready(redistest.AdminCtx(t)))
	st, ok := accepted.ServerStatus()
	require.True(t, ok)
	assert.Equal(t, "allkeys-lru", st.EvictionPolicy)
	assert.True(t, st.EvictionAccepted)
	_, ok = ask(accepted, pol.ID(), randomSubject(t), 1).(ratelimit.Evaluated)
	assert.True(t, ok)
}

// TestClusterServerChecksPrimaryMetLater: a replica running allkeys-lru
// that becomes a primary after Start is checked before its first program
// call and refused (Unavailable{server_rejected}, ErrEvictionPolicy, not
// one program call to it), while the other primaries keep deciding.
func TestClusterServerChecksPrimaryMetLater(t *testing.T) {
	c := redistest.StartCluster(t)
	keys := randomKeys(t)
	pol := fixedPolicy(t, "later", 100, time.Hour)
	cfg := clusterConfig()
	cc, err := NewClusterClient(cfg, c.Addrs())
	require.NoError(t, err)
	p, err := New(cc, keys, []ratelimit.Policy{pol}, Options{CommandTimeout: cfg.CommandTimeout, MaxInFlight: cfg.PoolSize, ServerChecks: &ServerChecks{}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	require.NoError(t, p.Start(redistest.AdminCtx(t)))

	s := randomSubject(t)
	key, err := StateKey(keys, pol, s)
	require.NoError(t, err)
	old := c.SlotOwner(keySlot(key))
	_, ok := ask(p, pol.ID(), s, 1).(ratelimit.Evaluated)
	require.True(t, ok)

	// A subject served by another primary, which stays as it is.
	var other ratelimit.SubjectDigest
	for range 1000 {
		o := randomSubject(t)
		k, err := StateKey(keys, pol, o)
		require.NoError(t, err)
		if c.SlotOwner(keySlot(k)).Addr() != old.Addr() {
			other = o
			break
		}
	}
	require.NotEmpty(t, other, "no subject on another primary in 1000 draws")

	replica := c.ReplicasOf(old)[0]
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, replica.Client().ConfigSet(ctx, "maxmemory-policy", "allkeys-lru").Err())
	c.Failover(replica)
	c.ResetStats()

	out, ok := ask(p, pol.ID(), s, 1).(ratelimit.Unavailable)
	require.True(t, ok, "the new primary is refused before its first call: %v", out)
	assert.Equal(t, ratelimit.CategoryServerRejected, out.Category)
	assert.ErrorIs(t, out.Cause, ErrEvictionPolicy)
	assert.Zero(t, programCalls(c), "no program call reached the evicting primary")

	_, ok = ask(p, pol.ID(), other, 1).(ratelimit.Evaluated)
	assert.True(t, ok, "the other primaries keep deciding")
	assert.ErrorIs(t, p.Ready(redistest.AdminCtx(t)), ErrEvictionPolicy, "readiness names the refused primary's policy")
}
