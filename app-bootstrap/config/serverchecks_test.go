package config

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestServerCheckVariables(t *testing.T) {
	cfg, err := Load(enabledEnv())
	require.NoError(t, err)
	assert.False(t, cfg.RateLimit.AllowEviction, "eviction is refused by default")
	assert.False(t, cfg.RateLimit.SkipServerConfigCheck, "the server's CONFIG is read by default")

	cfg, err = Load(with(enabledEnv(), "APP_RATE_LIMIT_ALLOW_EVICTION", "true", "APP_RATE_LIMIT_SKIP_SERVER_CONFIG_CHECK", "true"))
	require.NoError(t, err)
	assert.True(t, cfg.RateLimit.AllowEviction)
	assert.True(t, cfg.RateLimit.SkipServerConfigCheck)

	_, err = Load(with(enabledEnv(), "APP_RATE_LIMIT_ALLOW_EVICTION", "sometimes"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "APP_RATE_LIMIT_ALLOW_EVICTION")
}
