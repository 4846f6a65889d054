package redisclient

import (
	"crypto/tls"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var errTestInvalid = errors.New("invalid test config")

// rateLike and cacheLike are the two profiles the adapter's capabilities
// use (redisrate's and rediscache's), written here so the package's
// behaviour is pinned without importing them.
var (
	rateLike  = Profile{ProbeOnConnect: true, WaitsWithinCommand: true, Invalid: errTestInvalid}
	cacheLike = Profile{ContextDeadline: true, CapActiveConns: true, Invalid: errTestInvalid}
)

func testOptions(p Profile) Options {
	return Options{
		Username:       "u",
		Password:       "p",
		Protocol:       2,
		ClientName:     "tlb-test",
		DialTimeout:    100 * time.Millisecond,
		CommandTimeout: 250 * time.Millisecond,
		PoolSize:       8,
		PoolTimeout:    50 * time.Millisecond,
		Profile:        p,
	}
}

// assertFixed checks every option Universal fixes for every profile, on
// options as go-redis normalized them.
func assertFixed(t *testing.T, o *redis.Options, in Options) {
	t.Helper()
	assert.Equal(t, 0, o.MaxRetries, "MaxRetries -1 normalizes to 0 retries (0 would mean 3)")
	assert.Equal(t, time.Duration(0), o.MinRetryBackoff)
	assert.Equal(t, time.Duration(0), o.MaxRetryBackoff)
	assert.Equal(t, 1, o.DialerRetries, "one dial attempt")
	assert.Equal(t, in.DialTimeout, o.DialTimeout)
	assert.Equal(t, in.CommandTimeout, o.ReadTimeout)
	assert.Equal(t, in.CommandTimeout, o.WriteTimeout)
	assert.Equal(t, in.Profile.ContextDeadline, o.ContextTimeoutEnabled)
	assert.Equal(t, in.PoolSize, o.PoolSize)
	assert.Equal(t, in.PoolTimeout, o.PoolTimeout)
	assert.Equal(t, -1, o.PipelinePoolSize, "no dedicated pipeline pool")
	assert.Equal(t, 0, o.MinIdleConns, "no background pre-dialing")
	assert.True(t, o.DisableIdentity, "no CLIENT SETINFO traffic")
	require.NotNil(t, o.MaintNotificationsConfig)
	assert.Equal(t, maintnotifications.ModeDisabled, o.MaintNotificationsConfig.Mode)
	assert.Nil(t, o.ClientSideCache)
	assert.Nil(t, o.ClientSideCacheConfig)
	assert.Nil(t, o.Limiter)
	assert.Nil(t, o.TLSConfig, "TLS is done by the dialer")
	assert.NotNil(t, o.Dialer)
	assert.Equal(t, in.Protocol, o.Protocol)
	assert.Equal(t, in.Username, o.Username)
	assert.Equal(t, in.Password, o.Password)
	assert.Equal(t, in.ClientName, o.ClientName)
	if in.Profile.CapActiveConns {
		assert.Equal(t, in.PoolSize, o.MaxActiveConns)
	} else {
		assert.Equal(t, 0, o.MaxActiveConns)
	}
	assert.Equal(t, in.Profile.ProbeOnConnect, o.OnConnect != nil, "handshake probe per profile")
}

// TestEveryTopologyDerivesFromOneOptionSet: the standalone client, the
// Sentinel-mode client, the cluster client and its node clients (the
// hook a router uses) carry the same options, for both profiles.
func TestEveryTopologyDerivesFromOneOptionSet(t *testing.T) {
	for name, p := range map[string]Profile{"rate": rateLike, "cache": cacheLike} {
		t.Run(name, func(t *testing.T) {
			in := testOptions(p)
			if p.ContextDeadline {
				in.Protocol, in.DB = 3, 2
			}

			c := in.NewClient("127.0.0.1:6379")
			t.Cleanup(func() { _ = c.Close() })
			assertFixed(t, c.Options(), in)
			assert.Equal(t, "127.0.0.1:6379", c.Options().Addr)
			assert.Equal(t, in.DB, c.Options().DB)

			fc := in.NewFailoverClient(Sentinel{MasterName: "m", Addrs: []string{"127.0.0.1:1"}, Username: "su", Password: "sp"})
			t.Cleanup(func() { _ = fc.Close() })
			assertFixed(t, fc.Options(), in)
			assert.Equal(t, in.DB, fc.Options().DB)
			f := in.Universal([]string{"127.0.0.1:1"})
			f.MasterName, f.SentinelUsername, f.SentinelPassword = "m", "su", "sp"
			fo := f.Failover()
			assert.Equal(t, []string{"127.0.0.1:1"}, fo.SentinelAddrs)
			assert.Equal(t, "su", fo.SentinelUsername)
			assert.Equal(t, "sp", fo.SentinelPassword)

			in.DB = 0
			cc := in.NewClusterClient([]string{"127.0.0.1:1", "127.0.0.1:2"})
			t.Cleanup(func() { _ = cc.Close() })
			co := cc.Options()
			assert.Equal(t, 0, co.MaxRedirects, "MaxRedirects -1 normalizes to 0")
			assert.True(t, co.DisableRoutingPolicies)
			assert.False(t, co.ReadOnly || co.RouteByLatency || co.RouteRandomly)
			assert.Equal(t, []string{"127.0.0.1:1", "127.0.0.1:2"}, co.Addrs)
			require.NotNil(t, co.NewClient, "node clients come from the one option set")
			// A router asks the hook with nothing but the address (as
			// internal/send's ClusterRouter does).
			node := co.NewClient(&redis.Options{Addr: "10.0.0.7:7001"})
			t.Cleanup(func() { _ = node.Close() })
			assertFixed(t, node.Options(), in)
			assert.Equal(t, "10.0.0.7:7001", node.Options().Addr)
		})
	}
}

// TestUniversalCopiesAddrs: the caller's slice is not retained.
func TestUniversalCopiesAddrs(t *testing.T) {
	addrs := []string{"a:1"}
	u := testOptions(rateLike).Universal(addrs)
	addrs[0] = "b:2"
	assert.Equal(t, []string{"a:1"}, u.Addrs)
}

// TestTLSConfigIsClonedAndCompleted: the dialer's TLS configuration is a
// clone with MinVersion at least TLS 1.2; ServerName is filled per dialed
// host unless set; the caller's configuration is never changed.
func TestTLSConfigIsClonedAndCompleted(t *testing.T) {
	assert.Nil(t, tlsConfig(nil), "no TLS unless configured")

	orig := &tls.Config{}
	got := tlsConfig(orig)
	require.NotNil(t, got)
	assert.NotSame(t, orig, got)
	assert.Equal(t, uint16(tls.VersionTLS12), got.MinVersion)
	assert.Equal(t, uint16(0), orig.MinVersion, "caller's config untouched")

	host := tlsForHost(got, "redis.internal:6380")
	assert.Equal(t, "redis.internal", host.ServerName)
	assert.Equal(t, "", got.ServerName, "each host gets its own clone")
	assert.Equal(t, "node-2", tlsForHost(got, "node-2:7000").ServerName)
	assert.Equal(t, "::1", tlsForHost(got, "[::1]:6379").ServerName)
	assert.Equal(t, "", orig.ServerName, "caller's config untouched")

	named := tlsConfig(&tls.Config{MinVersion: tls.VersionTLS13, ServerName: "other"})
	assert.Equal(t, uint16(tls.VersionTLS13), named.MinVersion)
	assert.Equal(t, "other", tlsForHost(named, "redis.internal:6380").ServerName, "a set ServerName is kept")
}
