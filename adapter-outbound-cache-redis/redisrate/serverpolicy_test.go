package redisrate

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
)

// checkedProvider builds a Provider with server-policy checks on srv
// (not started); mutate adjusts the client config.
func checkedProvider(t *testing.T, srv *redistest.Server, checks ServerChecks, mutate func(*ClientConfig)) *Provider {
	t.Helper()
	cfg := serviceConfig(srv)
	if mutate != nil {
		mutate(&cfg)
	}
	client, err := NewClient(cfg)
	require.NoError(t, err)
	p, err := New(client, randomKeys(t), conformancePolicies(t, 1), Options{CommandTimeout: cfg.CommandTimeout, MaxInFlight: cfg.PoolSize, ServerChecks: &checks})
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// TestServerChecksHealthyServer: a standalone primary with noeviction
// passes; the status carries version, role, replication and persistence.
func TestServerChecksHealthyServer(t *testing.T) {
	srv := redistest.Start(t, redistest.WithConfig("appendonly", "yes"))
	ownServer(t, srv)
	p := checkedProvider(t, srv, ServerChecks{}, nil)
	_, ok := p.ServerStatus()
	assert.False(t, ok, "no status before Start")
	require.NoError(t, p.Start(redistest.AdminCtx(t)))
	require.NoError(t, p.Ready(redistest.AdminCtx(t)))
	st, ok := p.ServerStatus()
	require.True(t, ok)
	assert.Equal(t, srv.Version(), st.Version)
	assert.Equal(t, "master", st.Role)
	assert.Equal(t, 0, st.ConnectedReplicas)
	assert.Equal(t, -1, st.ReplicaLagSeconds)
	assert.Equal(t, EvictionPolicyNone, st.EvictionPolicy)
	assert.False(t, st.EvictionAccepted)
	assert.True(t, st.AOFEnabled)
	assert.False(t, st.RDBSaveConfigured, "redistest turns RDB save points off")
	assert.Equal(t, "aof", st.Persistence())
	assert.False(t, st.CheckedAt.IsZero())
}

// TestServerChecksEvictionPolicy: every policy other than noeviction,
// volatile-* included, fails Start and Ready with ErrEvictionPolicy naming
// it, unless AllowEviction accepts it; a change at runtime is seen by Ready.
func TestServerChecksEvictionPolicy(t *testing.T) {
	for _, policy := range []string{"volatile-lru", "allkeys-lru", "volatile-ttl", "allkeys-random"} {
		t.Run(policy, func(t *testing.T) {
			srv := redistest.Start(t, redistest.WithConfig("maxmemory-policy", policy))
			ownServer(t, srv)
			p := checkedProvider(t, srv, ServerChecks{}, nil)
			err := p.Start(redistest.AdminCtx(t))
			require.ErrorIs(t, err, ErrEvictionPolicy)
			assert.Contains(t, err.Error(), "maxmemory-policy is "+policy)
			require.ErrorIs(t, p.Ready(redistest.AdminCtx(t)), ErrEvictionPolicy)

			allowed := checkedProvider(t, srv, ServerChecks{AllowEviction: true}, nil)
			require.NoError(t, allowed.Start(redistest.AdminCtx(t)))
			st, _ := allowed.ServerStatus()
			assert.Equal(t, policy, st.EvictionPolicy)
			assert.True(t, st.EvictionAccepted)
		})
	}
	t.Run("changed at runtime", func(t *testing.T) {
		srv := redistest.Start(t)
		ownServer(t, srv)
		p := checkedProvider(t, srv, ServerChecks{}, nil)
		require.NoError(t, p.Start(redistest.AdminCtx(t)))
		require.NoError(t, srv.Client().ConfigSet(redistest.AdminCtx(t), "maxmemory-policy", "volatile-lfu").Err())
		require.ErrorIs(t, p.Ready(redistest.AdminCtx(t)), ErrEvictionPolicy)
		require.NoError(t, srv.Client().ConfigSet(redistest.AdminCtx(t), "maxmemory-policy", "noeviction").Err())
		require.NoError(t, p.Ready(redistest.AdminCtx(t)))
	})
}

// TestServerChecksReplicaRefused: an endpoint that is a replica fails
// Start with ErrReplica before anything is written; the status says
// role:slave. The primary reports the connected replica and its lag.
func TestServerChecksReplicaRefused(t *testing.T) {
	primary := redistest.Start(t)
	primary.Require(t, redistest.CapReplicate)
	replica := redistest.Start(t)
	host, port, _ := strings.Cut(primary.Addr(), ":")
	admin := replica.Client()
	require.NoError(t, admin.ReplicaOf(redistest.AdminCtx(t), host, port).Err())
	t.Cleanup(func() { _ = admin.ReplicaOf(context.Background(), "NO", "ONE").Err() })

	p := checkedProvider(t, replica, ServerChecks{}, nil)
	err := p.Start(redistest.AdminCtx(t))
	require.ErrorIs(t, err, ErrReplica)
	assert.Contains(t, err.Error(), "role:slave")
	st, ok := p.ServerStatus()
	require.True(t, ok)
	assert.Equal(t, "slave", st.Role)

	onPrimary := checkedProvider(t, primary, ServerChecks{}, nil)
	require.NoError(t, onPrimary.Start(redistest.AdminCtx(t)))
	require.Eventually(t, func() bool {
		if onPrimary.Ready(redistest.AdminCtx(t)) != nil {
			return false
		}
		st, _ := onPrimary.ServerStatus()
		return st.ConnectedReplicas == 1 && st.ReplicaLagSeconds >= 0
	}, 10*time.Second, 50*time.Millisecond, "the primary reports its replica")
}

// TestServerChecksConfigDisabled: a user without CONFIG (as on a managed
// Redis that disables it) fails Start with ErrServerConfigUnreadable; with
// SkipConfig it starts and the eviction policy is unknown.
func TestServerChecksConfigDisabled(t *testing.T) {
	srv := redistest.Start(t)
	ownServer(t, srv)
	require.NoError(t, srv.Client().Do(redistest.AdminCtx(t), "ACL", "SETUSER", "no-config", "on", ">pw", "~*", "+@all", "-config").Err())
	t.Cleanup(func() { _ = srv.Client().Do(context.Background(), "ACL", "DELUSER", "no-config").Err() })
	asUser := func(c *ClientConfig) { c.Username, c.Password = "no-config", "pw" }

	p := checkedProvider(t, srv, ServerChecks{}, asUser)
	err := p.Start(redistest.AdminCtx(t))
	require.ErrorIs(t, err, ErrServerConfigUnreadable)
	assert.Contains(t, err.Error(), "NOPERM")

	skip := checkedProvider(t, srv, ServerChecks{SkipConfig: true}, asUser)
	require.NoError(t, skip.Start(redistest.AdminCtx(t)))
	st, _ := skip.ServerStatus()
	assert.Empty(t, st.EvictionPolicy)
	assert.Equal(t, "master", st.Role)
}

// TestServerChecksOffByDefault: without ServerChecks nothing is read.
func TestServerChecksOffByDefault(t *testing.T) {
	srv := redistest.Start(t, redistest.WithConfig("maxmemory-policy", "allkeys-lru"))
	ownServer(t, srv)
	p := serviceProvider(t, srv, randomKeys(t), conformancePolicies(t, 1), nil)
	require.NoError(t, p.Ready(redistest.AdminCtx(t)))
	_, ok := p.ServerStatus()
	assert.False(t, ok)
}

func TestPersistenceSummary(t *testing.T) {
	assert.Equal(t, "none", ServerStatus{}.Persistence())
	assert.Equal(t, "rdb", ServerStatus{RDBSaveConfigured: true}.Persistence())
	assert.Equal(t, "aof+rdb", ServerStatus{AOFEnabled: true, RDBSaveConfigured: true}.Persistence())
}
