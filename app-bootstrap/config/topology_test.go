package config

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const sentinelPassword = "sentinel-pw-never-printed"

func clusterEnv() map[string]string {
	return with(enabledEnv(), "APP_RATE_LIMIT_REDIS_ADDR", "<unset>",
		"APP_RATE_LIMIT_REDIS_MODE", "cluster",
		"APP_RATE_LIMIT_REDIS_ADDRS", "127.0.0.1:7000, 127.0.0.1:7001,127.0.0.1:7002")
}

func sentinelEnv() map[string]string {
	return with(enabledEnv(), "APP_RATE_LIMIT_REDIS_ADDR", "<unset>",
		"APP_RATE_LIMIT_REDIS_MODE", "sentinel",
		"APP_RATE_LIMIT_REDIS_ADDRS", "127.0.0.1:26379,127.0.0.1:26380,127.0.0.1:26381",
		"APP_RATE_LIMIT_REDIS_MASTER_NAME", "mymaster",
		"APP_RATE_LIMIT_SENTINEL_USERNAME", "watcher",
		"APP_RATE_LIMIT_SENTINEL_PASSWORD", sentinelPassword)
}

func TestLoadTopologies(t *testing.T) {
	cfg, err := Load(enabledEnv())
	require.NoError(t, err)
	assert.Equal(t, Topology{Mode: ModeStandalone}, cfg.RateLimit.Topology, "standalone is the default")

	cfg, err = Load(clusterEnv())
	require.NoError(t, err)
	assert.Equal(t, ModeCluster, cfg.RateLimit.Topology.Mode)
	assert.Equal(t, []string{"127.0.0.1:7000", "127.0.0.1:7001", "127.0.0.1:7002"}, cfg.RateLimit.Topology.Addrs)
	assert.Empty(t, cfg.RateLimit.Redis.Addr)

	cfg, err = Load(sentinelEnv())
	require.NoError(t, err)
	top := cfg.RateLimit.Topology
	assert.Equal(t, ModeSentinel, top.Mode)
	assert.Equal(t, "mymaster", top.MasterName)
	assert.Equal(t, "watcher", top.SentinelUsername)
	assert.Equal(t, sentinelPassword, top.SentinelPassword.Reveal())
	for _, out := range []string{cfg.String(), fmt.Sprintf("%v %+v %#v", cfg, cfg, top.String())} {
		assert.NotContains(t, out, sentinelPassword)
	}
	assert.Contains(t, cfg.String(), "topology=sentinel(mymaster@127.0.0.1:26379,127.0.0.1:26380,127.0.0.1:26381) sentinel_user=watcher sentinel_password="+Redacted)

	file := writeFile(t, "sentinel-pw", sentinelPassword+"\n")
	cfg, err = Load(with(sentinelEnv(), "APP_RATE_LIMIT_SENTINEL_PASSWORD", "<unset>", "APP_RATE_LIMIT_SENTINEL_PASSWORD_FILE", file))
	require.NoError(t, err)
	assert.Equal(t, sentinelPassword, cfg.RateLimit.Topology.SentinelPassword.Reveal())
}

// TestLoadTopologyRejections: every invalid combination is one line naming
// the variable at fault.
func TestLoadTopologyRejections(t *testing.T) {
	tests := []struct {
		name     string
		env      map[string]string
		variable string
		sentinel error
		contains string
	}{
		{"unknown mode", with(enabledEnv(), "APP_RATE_LIMIT_REDIS_MODE", "ring"), "APP_RATE_LIMIT_REDIS_MODE", ErrInvalid, `"ring": want standalone, sentinel or cluster`},
		{"addrs in standalone", with(enabledEnv(), "APP_RATE_LIMIT_REDIS_ADDRS", "a:1"), "APP_RATE_LIMIT_REDIS_ADDRS", ErrConflict, "standalone"},
		{"master name in standalone", with(enabledEnv(), "APP_RATE_LIMIT_REDIS_MASTER_NAME", "m"), "APP_RATE_LIMIT_REDIS_MASTER_NAME", ErrConflict, "only sentinel mode"},
		{"master name in cluster", with(clusterEnv(), "APP_RATE_LIMIT_REDIS_MASTER_NAME", "m"), "APP_RATE_LIMIT_REDIS_MASTER_NAME", ErrConflict, "cluster"},
		{"sentinel user in cluster", with(clusterEnv(), "APP_RATE_LIMIT_SENTINEL_USERNAME", "u"), "APP_RATE_LIMIT_SENTINEL_USERNAME", ErrConflict, "cluster"},
		{"sentinel password in standalone", with(enabledEnv(), "APP_RATE_LIMIT_SENTINEL_PASSWORD", sentinelPassword), "APP_RATE_LIMIT_SENTINEL_PASSWORD", ErrConflict, "standalone"},
		{"cluster without addrs", with(clusterEnv(), "APP_RATE_LIMIT_REDIS_ADDRS", "<unset>"), "APP_RATE_LIMIT_REDIS_ADDRS", ErrRequired, "seed node addresses"},
		{"sentinel without addrs", with(sentinelEnv(), "APP_RATE_LIMIT_REDIS_ADDRS", "<unset>"), "APP_RATE_LIMIT_REDIS_ADDRS", ErrRequired, "sentinel addresses"},
		{"sentinel without master", with(sentinelEnv(), "APP_RATE_LIMIT_REDIS_MASTER_NAME", "<unset>"), "APP_RATE_LIMIT_REDIS_MASTER_NAME", ErrRequired, "sentinel mode needs"},
		{"master name with a space", with(sentinelEnv(), "APP_RATE_LIMIT_REDIS_MASTER_NAME", "my master"), "APP_RATE_LIMIT_REDIS_MASTER_NAME", ErrInvalid, "one word"},
		{"addr beside cluster", with(clusterEnv(), "APP_RATE_LIMIT_REDIS_ADDR", "127.0.0.1:6390"), "APP_RATE_LIMIT_REDIS_ADDR", ErrConflict, "REDIS_ADDRS"},
		{"duplicate address", with(clusterEnv(), "APP_RATE_LIMIT_REDIS_ADDRS", "a:1,b:2,A:1"), "APP_RATE_LIMIT_REDIS_ADDRS", ErrInvalid, `element 3 "A:1" duplicates element 1`},
		{"malformed address", with(clusterEnv(), "APP_RATE_LIMIT_REDIS_ADDRS", "a:1,nohost"), "APP_RATE_LIMIT_REDIS_ADDRS", ErrInvalid, `element 2 "nohost"`},
		{"empty element", with(clusterEnv(), "APP_RATE_LIMIT_REDIS_ADDRS", "a:1,,b:2"), "APP_RATE_LIMIT_REDIS_ADDRS", ErrInvalid, "element 2 is empty"},
		{"port out of range", with(clusterEnv(), "APP_RATE_LIMIT_REDIS_ADDRS", "a:70000"), "APP_RATE_LIMIT_REDIS_ADDRS", ErrInvalid, "port 1..65535"},
		{"acks out of range", with(enabledEnv(), "APP_RATE_LIMIT_REPLICATION_ACKS", "17"), "APP_RATE_LIMIT_REPLICATION_ACKS", ErrInvalid, "want 0 (off) to 16"},
		{"ack timeout without acks", with(enabledEnv(), "APP_RATE_LIMIT_REPLICATION_ACK_TIMEOUT", "50ms"), "APP_RATE_LIMIT_REPLICATION_ACK_TIMEOUT", ErrConflict, "REPLICATION_ACKS is 0"},
		{"ack timeout too long", with(enabledEnv(), "APP_RATE_LIMIT_REPLICATION_ACKS", "1", "APP_RATE_LIMIT_REPLICATION_ACK_TIMEOUT", "200ms"), "APP_RATE_LIMIT_REPLICATION_ACK_TIMEOUT", ErrInvalid, "want 1ms..125ms"},
		{"cluster node is the cache", with(clusterEnv(), "APP_CACHE_REDIS_ADDR", "127.0.0.1:7001"), "APP_RATE_LIMIT_REDIS_ADDRS", ErrSharedRedis, "same server"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(tt.env)
			require.Error(t, err)
			ves := VarErrors(err)
			require.Len(t, ves, 1, "want exactly one problem, got: %v", err)
			assert.Equal(t, tt.variable, ves[0].Var)
			assert.ErrorIs(t, err, tt.sentinel)
			msg := err.Error()
			assert.True(t, strings.HasPrefix(msg, tt.variable+": "), "message %q must start with the variable", msg)
			assert.Contains(t, msg, tt.contains)
			assert.NotContains(t, msg, "\n")
			assert.NotContains(t, msg, sentinelPassword)
		})
	}
}

func TestLoadReplicationAcks(t *testing.T) {
	cfg, err := Load(enabledEnv())
	require.NoError(t, err)
	assert.Zero(t, cfg.RateLimit.ReplicationAcks, "off by default")
	assert.Zero(t, cfg.RateLimit.ReplicationAckTimeout)

	cfg, err = Load(with(enabledEnv(), "APP_RATE_LIMIT_REPLICATION_ACKS", "1"))
	require.NoError(t, err)
	assert.Equal(t, 1, cfg.RateLimit.ReplicationAcks)
	assert.Equal(t, cfg.RateLimit.CommandTimeout/2, cfg.RateLimit.ReplicationAckTimeout, "derived: half the command timeout")
	assert.Contains(t, cfg.String(), "replication_acks=1")

	cfg, err = Load(with(clusterEnv(), "APP_RATE_LIMIT_REPLICATION_ACKS", "2", "APP_RATE_LIMIT_REPLICATION_ACK_TIMEOUT", "20ms"))
	require.NoError(t, err)
	assert.Equal(t, 2, cfg.RateLimit.ReplicationAcks)
	assert.Equal(t, 20*time.Millisecond, cfg.RateLimit.ReplicationAckTimeout)
}

func cacheEnv(kv ...string) map[string]string {
	base := map[string]string{
		"APP_CACHE_ENABLED":          "true",
		"APP_CACHE_REDIS_ADDR":       "127.0.0.1:6391",
		"APP_CACHE_REDIS_KEY_SECRET": cacheSecret,
		"APP_WEB_SUBJECT_SECRET":     subjectSecret,
	}
	return with(base, kv...)
}

// TestLoadCacheTopologies: the cache has the same mode family under
// APP_CACHE_, with one line per invalid combination.
func TestLoadCacheTopologies(t *testing.T) {
	cfg, err := Load(cacheEnv())
	require.NoError(t, err)
	assert.Equal(t, ModeStandalone, cfg.Cache.Topology.Mode)

	cfg, err = Load(cacheEnv("APP_CACHE_REDIS_ADDR", "<unset>", "APP_CACHE_REDIS_MODE", "sentinel",
		"APP_CACHE_REDIS_ADDRS", "127.0.0.1:26379", "APP_CACHE_REDIS_MASTER_NAME", "cache",
		"APP_CACHE_SENTINEL_PASSWORD", sentinelPassword))
	require.NoError(t, err)
	assert.Equal(t, Topology{Mode: ModeSentinel, Addrs: []string{"127.0.0.1:26379"}, MasterName: "cache", SentinelPassword: cfg.Cache.Topology.SentinelPassword}, cfg.Cache.Topology)
	assert.NotContains(t, cfg.String(), sentinelPassword)

	for _, tc := range []struct {
		env      map[string]string
		variable string
	}{
		{cacheEnv("APP_CACHE_REDIS_MODE", "cluster", "APP_CACHE_REDIS_ADDRS", "a:1"), "APP_CACHE_REDIS_ADDR"},
		{cacheEnv("APP_CACHE_REDIS_ADDR", "<unset>", "APP_CACHE_REDIS_MODE", "cluster"), "APP_CACHE_REDIS_ADDRS"},
		{cacheEnv("APP_CACHE_REDIS_ADDR", "<unset>", "APP_CACHE_REDIS_MODE", "cluster", "APP_CACHE_REDIS_ADDRS", "a:1", "APP_CACHE_REDIS_DB", "3"), "APP_CACHE_REDIS_DB"},
		{cacheEnv("APP_CACHE_REDIS_MASTER_NAME", "m"), "APP_CACHE_REDIS_MASTER_NAME"},
		{cacheEnv("APP_CACHE_REDIS_MODE", "ring"), "APP_CACHE_REDIS_MODE"},
	} {
		_, err := Load(tc.env)
		require.Error(t, err)
		ves := VarErrors(err)
		require.Len(t, ves, 1, "%v", err)
		assert.Equal(t, tc.variable, ves[0].Var)
	}
}
