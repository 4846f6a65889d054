package redisclient

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBuiltOptionsPassTheirProfilesCheck: the check is the inverse of the
// builder, for every profile and topology.
func TestBuiltOptionsPassTheirProfilesCheck(t *testing.T) {
	for name, p := range map[string]Profile{"rate": rateLike, "cache": cacheLike} {
		t.Run(name, func(t *testing.T) {
			in := testOptions(p)
			l := Limits{CommandTimeout: in.CommandTimeout, MaxInFlight: in.PoolSize}
			c := in.NewClient("127.0.0.1:1")
			t.Cleanup(func() { _ = c.Close() })
			require.NoError(t, p.CheckClient(c.Options(), l))
			fc := in.NewFailoverClient(Sentinel{MasterName: "m", Addrs: []string{"127.0.0.1:1"}})
			t.Cleanup(func() { _ = fc.Close() })
			require.NoError(t, p.CheckClient(fc.Options(), l))
			cc := in.NewClusterClient([]string{"127.0.0.1:1"})
			t.Cleanup(func() { _ = cc.Close() })
			require.NoError(t, p.CheckCluster(cc.Options(), l))
		})
	}
}

// TestCheckClientRefusesUnsafeOptions: every option certainty depends on,
// changed, is one error naming it and wrapping the profile's error.
func TestCheckClientRefusesUnsafeOptions(t *testing.T) {
	in := testOptions(rateLike)
	l := Limits{CommandTimeout: in.CommandTimeout, MaxInFlight: in.PoolSize}
	tests := []struct {
		name   string
		modify func(*redis.Options)
		want   string
	}{
		{"default retries", func(o *redis.Options) { o.MaxRetries = 0 }, "MaxRetries"},
		{"explicit retries", func(o *redis.Options) { o.MaxRetries = 2 }, "MaxRetries"},
		{"default dial retries", func(o *redis.Options) { o.DialerRetries = 0 }, "DialerRetries"},
		{"context timeouts", func(o *redis.Options) { o.ContextTimeoutEnabled = true }, "ContextTimeoutEnabled"},
		{"read timeout differs", func(o *redis.Options) { o.ReadTimeout = time.Second }, "ReadTimeout"},
		{"write timeout differs", func(o *redis.Options) { o.WriteTimeout = time.Second }, "WriteTimeout"},
		{"dial timeout too long", func(o *redis.Options) { o.DialTimeout = time.Second }, "DialTimeout"},
		{"pool timeout too long", func(o *redis.Options) { o.PoolTimeout = time.Second }, "PoolTimeout"},
		{"pool smaller than in-flight", func(o *redis.Options) { o.PoolSize = 4 }, "PoolSize"},
		{"client-side cache", func(o *redis.Options) { o.ClientSideCacheConfig = &redis.ClientSideCacheConfig{} }, "client-side"},
		{"maint notifications", func(o *redis.Options) { o.MaintNotificationsConfig = nil }, "maintenance"},
		{"limiter", func(o *redis.Options) { o.Limiter = nopLimiter{} }, "Limiter"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := in.Simple("127.0.0.1:1")
			tt.modify(o)
			c := redis.NewClient(o)
			t.Cleanup(func() { _ = c.Close() })
			err := rateLike.CheckClient(c.Options(), l)
			require.ErrorIs(t, err, errTestInvalid)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
	t.Run("the cache profile requires the caller's deadline", func(t *testing.T) {
		c := testOptions(rateLike).NewClient("127.0.0.1:1")
		t.Cleanup(func() { _ = c.Close() })
		err := cacheLike.CheckClient(c.Options(), l)
		require.ErrorIs(t, err, errTestInvalid)
		assert.Contains(t, err.Error(), "ContextTimeoutEnabled must be true")
	})
	t.Run("waits beyond the command timeout are the rate profile's concern", func(t *testing.T) {
		o := testOptions(cacheLike)
		o.DialTimeout = time.Second
		c := o.NewClient("127.0.0.1:1")
		t.Cleanup(func() { _ = c.Close() })
		require.NoError(t, cacheLike.CheckClient(c.Options(), l))
	})
	t.Run("no profile error: ErrInvalid", func(t *testing.T) {
		o := in.Simple("127.0.0.1:1")
		o.MaxRetries = 3
		c := redis.NewClient(o)
		t.Cleanup(func() { _ = c.Close() })
		require.ErrorIs(t, Profile{}.CheckClient(c.Options(), l), ErrInvalid)
	})
}

type nopLimiter struct{}

func (nopLimiter) Allow() error       { return nil }
func (nopLimiter) ReportResult(error) {}

// TestCheckClusterRefusesClientsNotBuiltHere: go-redis's own cluster
// options (redirects, replica routing, no hook) are refused, naming the
// option; a hook whose node clients retry is refused through CheckClient.
func TestCheckClusterRefusesClientsNotBuiltHere(t *testing.T) {
	in := testOptions(rateLike)
	l := Limits{CommandTimeout: in.CommandTimeout, MaxInFlight: in.PoolSize}
	for _, tt := range []struct {
		name string
		o    *redis.ClusterOptions
		want []string
	}{
		{"go-redis defaults", &redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}}, []string{"MaxRedirects", "cluster node client", "DialerRetries"}},
		{"replica reads", func() *redis.ClusterOptions {
			o := in.Universal([]string{"127.0.0.1:1"}).Cluster()
			o.ReadOnly = true
			o.NewClient = func(n *redis.Options) *redis.Client { return redis.NewClient(in.Simple(n.Addr)) }
			return o
		}(), []string{"primaries only"}},
		{"no seeds", func() *redis.ClusterOptions {
			o := in.Universal(nil).Cluster()
			o.Addrs = nil
			return o
		}(), []string{"no seed Addrs"}},
		{"node clients that retry", func() *redis.ClusterOptions {
			o := in.Universal([]string{"127.0.0.1:1"}).Cluster()
			o.NewClient = func(n *redis.Options) *redis.Client {
				s := in.Simple(n.Addr)
				s.MaxRetries = 0 // go-redis: 3 retries
				return redis.NewClient(s)
			}
			return o
		}(), []string{"cluster node client", "MaxRetries"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := redis.NewClusterClient(tt.o)
			t.Cleanup(func() { _ = c.Close() })
			err := rateLike.CheckCluster(c.Options(), l)
			require.ErrorIs(t, err, errTestInvalid)
			for _, w := range tt.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

// TestTopologyChecksNameTheField: address lists and master names.
func TestTopologyChecksNameTheField(t *testing.T) {
	for _, tc := range []struct {
		name  string
		addrs []string
		want  string
	}{
		{"none", nil, "Seeds: 0 addresses"},
		{"too many", make([]string, MaxAddrs+1), "Seeds: 65 addresses"},
		{"malformed", []string{"127.0.0.1"}, `Seeds[0] "127.0.0.1" must be host:port`},
		{"no host", []string{":6379"}, `Seeds[0] ":6379"`},
		{"bad port", []string{"h:0"}, `Seeds[0] "h:0"`},
		{"port too big", []string{"h:65536"}, `Seeds[0] "h:65536"`},
		{"duplicate", []string{"a:1", "b:2", "A:1"}, `Seeds[2] "A:1" duplicates Seeds[0]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := rateLike.CheckAddrs("Seeds", tc.addrs)
			require.Len(t, errs, 1)
			require.ErrorIs(t, errs[0], errTestInvalid)
			assert.Contains(t, errs[0].Error(), tc.want)
		})
	}
	assert.Empty(t, rateLike.CheckAddrs("Seeds", []string{"a:1", "[::1]:6379", "b:65535"}))

	for _, name := range []string{"", "two words", "tab\tname"} {
		err := cacheLike.CheckMasterName("master name", name)
		require.ErrorIs(t, err, errTestInvalid, "%q", name)
		assert.Contains(t, err.Error(), "master name must be one non-empty word")
	}
	require.NoError(t, cacheLike.CheckMasterName("master name", "mymaster"))
}
