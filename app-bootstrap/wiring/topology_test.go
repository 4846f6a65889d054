package wiring

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/app-bootstrap/config"
)

// TestCoordinationClientPerMode: each mode gets redisrate's own
// constructor (no I/O): a *redis.Client for standalone and sentinel, a
// *redis.ClusterClient for cluster, each with retries and redirects off.
func TestCoordinationClientPerMode(t *testing.T) {
	base := config.RateLimit{
		Enabled: true, CommandTimeout: 250 * time.Millisecond, DialTimeout: 250 * time.Millisecond,
		PoolTimeout: 250 * time.Millisecond, PoolSize: 8,
	}
	standalone := base
	standalone.Redis.Addr = "127.0.0.1:1"
	standalone.Topology.Mode = config.ModeStandalone
	sentinel := base
	sentinel.Topology = config.Topology{Mode: config.ModeSentinel, Addrs: []string{"127.0.0.1:2", "127.0.0.1:3"}, MasterName: "m"}
	cluster := base
	cluster.Topology = config.Topology{Mode: config.ModeCluster, Addrs: []string{"127.0.0.1:4"}}

	c, err := coordinationClient(standalone)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	require.IsType(t, &redis.Client{}, c)
	assert.Equal(t, "127.0.0.1:1", c.(*redis.Client).Options().Addr)

	c, err = coordinationClient(sentinel)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	require.IsType(t, &redis.Client{}, c)
	assert.Equal(t, 0, c.(*redis.Client).Options().MaxRetries)

	c, err = coordinationClient(cluster)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	require.IsType(t, &redis.ClusterClient{}, c)
	assert.Equal(t, 0, c.(*redis.ClusterClient).Options().MaxRedirects)
	assert.Equal(t, []string{"127.0.0.1:4"}, c.(*redis.ClusterClient).Options().Addrs)
}

// TestCacheClientPerMode: the cache gets rediscache's constructor for each
// mode (no I/O).
func TestCacheClientPerMode(t *testing.T) {
	base := config.Cache{Enabled: true, CommandTimeout: 100 * time.Millisecond, DialTimeout: 100 * time.Millisecond,
		PoolTimeout: 100 * time.Millisecond, PoolSize: 4}
	standalone := base
	standalone.Redis.Addr = "127.0.0.1:1"
	sentinel := base
	sentinel.Topology = config.Topology{Mode: config.ModeSentinel, Addrs: []string{"127.0.0.1:2"}, MasterName: "m"}
	cluster := base
	cluster.Topology = config.Topology{Mode: config.ModeCluster, Addrs: []string{"127.0.0.1:3"}}
	for _, tc := range []struct {
		cfg  config.Cache
		want any
	}{{standalone, &redis.Client{}}, {sentinel, &redis.Client{}}, {cluster, &redis.ClusterClient{}}} {
		c, err := cacheClient(tc.cfg)
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		assert.IsType(t, tc.want, c)
	}
}

// TestClientErrorsAreNilInterfaces: an invalid configuration in every mode
// is an error with a nil redis.UniversalClient (not a typed nil pointer a
// caller's nil check would miss), for both capabilities.
func TestClientErrorsAreNilInterfaces(t *testing.T) {
	for _, top := range []config.Topology{
		{Mode: config.ModeStandalone},
		{Mode: config.ModeSentinel, Addrs: []string{"127.0.0.1:2"}, MasterName: "m"},
		{Mode: config.ModeCluster, Addrs: []string{"127.0.0.1:3"}},
	} {
		t.Run(top.Mode, func(t *testing.T) {
			rl := config.RateLimit{Enabled: true, Topology: top} // no timeouts, no pool: invalid
			rl.Redis.Addr = "127.0.0.1:1"
			c, err := coordinationClient(rl)
			require.Error(t, err)
			assert.True(t, c == nil, "nil interface, got %T", c)

			cc := config.Cache{Enabled: true, Topology: top}
			cc.Redis.Addr = "127.0.0.1:1"
			c, err = cacheClient(cc)
			require.Error(t, err)
			assert.True(t, c == nil, "nil interface, got %T", c)
		})
	}
}
