package rediscache

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
	"github.com/tech-log/tech-log-backend/shared-contract/cache"
	"github.com/tech-log/tech-log-backend/shared-contract/keyspace"
)

func topologyConfig() Config {
	cfg := DefaultConfig("")
	cfg.CommandTimeout, cfg.DialTimeout, cfg.PoolTimeout = 5*time.Second, 2*time.Second, 5*time.Second
	return cfg
}

func TestTopologyClientsValidate(t *testing.T) {
	cfg := topologyConfig()
	_, err := NewClusterClient(cfg, nil)
	require.ErrorIs(t, err, ErrInvalidConfig)
	_, err = NewClusterClient(cfg, []string{"a:1", "A:1"})
	require.ErrorIs(t, err, ErrInvalidConfig)
	assert.Contains(t, err.Error(), "duplicate")
	withDB := cfg
	withDB.DB = 2
	_, err = NewClusterClient(withDB, []string{"a:1"})
	require.ErrorIs(t, err, ErrInvalidConfig)
	assert.Contains(t, err.Error(), "database 0 only")
	withAddr := cfg
	withAddr.Addr = "127.0.0.1:6379"
	_, err = NewFailoverClient(withAddr, "m", []string{"a:1"}, "", "")
	require.ErrorIs(t, err, ErrInvalidConfig)
	_, err = NewFailoverClient(cfg, "", []string{"a:1"}, "", "")
	require.ErrorIs(t, err, ErrInvalidConfig)
	assert.Contains(t, err.Error(), "master name")
}

// storeRoundTrip exercises every Store operation on client.
func storeRoundTrip(t *testing.T, client redis.UniversalClient) {
	t.Helper()
	secret, err := keyspace.NewSecret([]byte("topology-lane-secret-0123456789abcdefghij"))
	require.NoError(t, err)
	keys, err := keyspace.NewBuilder("ttopo", secret)
	require.NoError(t, err)
	s, err := New(client, keys)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := range 12 { // keys over every primary of a cluster
		k := cache.Key{Region: "profile", Kind: "page", Name: fmt.Sprintf("user-%d", i)}
		require.NoError(t, s.Set(ctx, k, []byte("v1"), time.Minute))
		e, ok, err := s.Get(ctx, k)
		require.NoError(t, err)
		require.True(t, ok)
		assert.Equal(t, "v1", string(e.Value))
		won, err := s.CompareAndReplace(ctx, k, e.Token, []byte("v2"), time.Minute)
		require.NoError(t, err)
		assert.True(t, won)
		won, err = s.SetIfAbsent(ctx, k, []byte("v3"), time.Minute)
		require.NoError(t, err)
		assert.False(t, won, "present")
	}
}

func TestClusterStore(t *testing.T) {
	c := redistest.StartCluster(t)
	client, err := NewClusterClient(topologyConfig(), c.Addrs())
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.Close() })
	storeRoundTrip(t, client)
}

func TestSentinelStore(t *testing.T) {
	s := redistest.StartSentinel(t)
	client, err := NewFailoverClient(topologyConfig(), s.MasterName(), s.SentinelAddrs(), "", "")
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.Close() })
	storeRoundTrip(t, client)
}
