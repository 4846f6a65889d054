package wiring

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-inbound-web/localimit"
	"github.com/tech-log/tech-log-backend/adapter-inbound-web/subject"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/ratefallback"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/rediscache"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redisrate"
	"github.com/tech-log/tech-log-backend/app-bootstrap/config"
)

// TestConfigBounds pins each bound config states again (it imports no
// adapter, ADR 0036) equal to the adapter's exported one, so that start-up
// rejects, naming the APP_ variable, exactly what the adapter's constructor
// would.
func TestConfigBounds(t *testing.T) {
	for _, c := range []struct {
		name       string
		config, of any
	}{
		{"MaxRateLimitTimeout", config.MaxRateLimitTimeout, redisrate.MaxTimeout},
		{"MaxRateLimitPool", config.MaxRateLimitPool, redisrate.MaxPoolSize},
		{"MaxBreakerThreshold", config.MaxBreakerThreshold, redisrate.MaxBreakerThreshold},
		{"MinProbeInterval", config.MinProbeInterval, redisrate.MinProbeInterval},
		{"MaxProbeInterval", config.MaxProbeInterval, redisrate.MaxProbeInterval},
		{"MaxReplicationAcks", config.MaxReplicationAcks, redisrate.MaxReplicationAcks},
		{"EvaluationTimeoutFactor", config.EvaluationTimeoutFactor, redisrate.EvaluationTimeoutFactor},
		{"DedupEvaluationTimeoutFactor", config.DedupEvaluationTimeoutFactor, redisrate.DedupEvaluationTimeoutFactor},
		{"MaxFallbackSubjects", config.MaxFallbackSubjects, ratefallback.MaxSubjects},
		{"MaxCacheTimeout", config.MaxCacheTimeout, rediscache.MaxTimeout},
		{"MaxCachePool", config.MaxCachePool, rediscache.MaxPoolSize},
		{"MaxTrustedProxies", config.MaxTrustedProxies, subject.MaxTrustedProxies},
		{"MinIPv6Prefix", config.MinIPv6Prefix, subject.MinIPv6PrefixLen},
		{"MaxLocalBurst", config.MaxLocalBurst, localimit.MaxBurst},
		{"MaxLocalClients", config.MaxLocalClients, localimit.MaxClientsLimit},
	} {
		assert.Equal(t, c.of, c.config, c.name)
	}
}

// TestDefaultTimeoutsAreRedisratesDefaults: the env defaults of the
// coordination client's timeouts are redisrate's exported defaults, which
// the fault lane runs at, and the derived evaluation timeout is
// redisrate.EvaluationTimeout of them (moved from config, ADR 0036).
func TestDefaultTimeoutsAreRedisratesDefaults(t *testing.T) {
	cfg := loadConfig(t, enabledKV("127.0.0.1:6390")...)
	assert.Equal(t, redisrate.DefaultCommandTimeout, cfg.RateLimit.CommandTimeout)
	assert.Equal(t, redisrate.DefaultDialTimeout, cfg.RateLimit.DialTimeout)
	assert.Equal(t, redisrate.DefaultBreakerThreshold, cfg.RateLimit.BreakerThreshold)
	assert.Equal(t, redisrate.DefaultBreakerProbeInterval, cfg.RateLimit.BreakerProbeInterval)
	assert.Equal(t, redisrate.EvaluationTimeout(redisrate.DefaultCommandTimeout, false), cfg.Web.EvaluationTimeout, "the example policies have no dedup window")
}

// TestDerivedEvaluationTimeoutIsRedisrates: with a dedup window among the
// policies the derived APP_WEB_EVALUATION_TIMEOUT is redisrate's
// EvaluationTimeout with dedup (moved from config, ADR 0036).
func TestDerivedEvaluationTimeoutIsRedisrates(t *testing.T) {
	file := t.TempDir() + "/policies.json"
	require.NoError(t, os.WriteFile(file, []byte(`{"policies":[{"id":"api","revision":1,"algorithm":"fixed_window","limit":10,"window":"1m","maxCost":1,"cleanupGrace":"1m","maxClockRegression":"2s","failurePolicy":"fail-closed","dedupWindow":"10m"}]}`), 0o600))
	cfg := loadConfig(t, append(enabledKV("127.0.0.1:6390"), "APP_RATE_LIMIT_POLICIES_FILE", file)...)
	assert.Equal(t, redisrate.DefaultCommandTimeout, cfg.RateLimit.CommandTimeout)
	assert.Equal(t, redisrate.EvaluationTimeout(redisrate.DefaultCommandTimeout, true), cfg.Web.EvaluationTimeout)
}
