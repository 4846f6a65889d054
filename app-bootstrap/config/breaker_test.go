package config

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLoadBreakerDefaultsAndOverrides(t *testing.T) {
	cfg, err := Load(enabledEnv())
	require.NoError(t, err)
	assert.Equal(t, 5, cfg.RateLimit.BreakerThreshold)
	assert.Equal(t, time.Second, cfg.RateLimit.BreakerProbeInterval)

	cfg, err = Load(with(enabledEnv(), "APP_RATE_LIMIT_BREAKER_THRESHOLD", "12", "APP_RATE_LIMIT_BREAKER_PROBE_INTERVAL", "250ms"))
	require.NoError(t, err)
	assert.Equal(t, 12, cfg.RateLimit.BreakerThreshold)
	assert.Equal(t, 250*time.Millisecond, cfg.RateLimit.BreakerProbeInterval)

	cfg, err = Load(with(enabledEnv(), "APP_RATE_LIMIT_BREAKER_THRESHOLD", "0", "APP_RATE_LIMIT_BREAKER_PROBE_INTERVAL", "0s"))
	require.NoError(t, err, "threshold 0 turns the breaker off; the interval is then not checked")
	assert.Zero(t, cfg.RateLimit.BreakerThreshold)
	assert.Zero(t, cfg.RateLimit.BreakerProbeInterval)
}

func TestLoadBreakerRejections(t *testing.T) {
	tests := []struct {
		name, variable, contains string
		env                      map[string]string
	}{
		{"threshold negative", "APP_RATE_LIMIT_BREAKER_THRESHOLD", "want 0..1000", with(enabledEnv(), "APP_RATE_LIMIT_BREAKER_THRESHOLD", "-1")},
		{"threshold too large", "APP_RATE_LIMIT_BREAKER_THRESHOLD", "want 0..1000", with(enabledEnv(), "APP_RATE_LIMIT_BREAKER_THRESHOLD", "1001")},
		{"threshold not a number", "APP_RATE_LIMIT_BREAKER_THRESHOLD", `"many"`, with(enabledEnv(), "APP_RATE_LIMIT_BREAKER_THRESHOLD", "many")},
		{"interval too short", "APP_RATE_LIMIT_BREAKER_PROBE_INTERVAL", "want 10ms..1m0s", with(enabledEnv(), "APP_RATE_LIMIT_BREAKER_PROBE_INTERVAL", "1ms")},
		{"interval too long", "APP_RATE_LIMIT_BREAKER_PROBE_INTERVAL", "want 10ms..1m0s", with(enabledEnv(), "APP_RATE_LIMIT_BREAKER_PROBE_INTERVAL", "2m")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(tt.env)
			require.Error(t, err)
			ves := VarErrors(err)
			require.Len(t, ves, 1, "%v", err)
			assert.Equal(t, tt.variable, ves[0].Var)
			assert.ErrorIs(t, err, ErrInvalid)
			assert.Contains(t, err.Error(), tt.contains)
		})
	}
}

func TestLoadDisabledIgnoresBreakerVariables(t *testing.T) {
	cfg, err := Load(map[string]string{"APP_RATE_LIMIT_BREAKER_PROBE_INTERVAL": "1ms"})
	require.NoError(t, err)
	assert.Zero(t, cfg.RateLimit.BreakerThreshold)
}

func TestLoadLocalFallbackNeedsTheBreaker(t *testing.T) {
	file := writeFile(t, "p.json", `{"policies":[{"id":"api","revision":1,"algorithm":"fixed_window","limit":10,"window":"1m","maxCost":1,
		"cleanupGrace":"1m","maxClockRegression":"2s","failurePolicy":"local-fallback","fallbackInstances":2}]}`)
	_, err := Load(with(enabledEnv(), "APP_RATE_LIMIT_POLICIES_FILE", file))
	require.NoError(t, err)
	_, err = Load(with(enabledEnv(), "APP_RATE_LIMIT_POLICIES_FILE", file, "APP_RATE_LIMIT_BREAKER_THRESHOLD", "0"))
	require.Error(t, err)
	ves := VarErrors(err)
	require.Len(t, ves, 1, "%v", err)
	assert.Equal(t, "APP_RATE_LIMIT_BREAKER_THRESHOLD", ves[0].Var)
	assert.Contains(t, err.Error(), `policy "api" is local-fallback`)
}
