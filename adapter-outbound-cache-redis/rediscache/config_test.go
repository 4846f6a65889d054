package rediscache

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestConfigValidate(t *testing.T) {
	ok := DefaultConfig("127.0.0.1:6379")
	tests := []struct {
		name   string
		mutate func(*Config)
		want   []string // substrings naming the fields at fault; nil = valid
	}{
		{"default is valid", func(*Config) {}, nil},
		{"ipv6 and tls 1.3 are valid", func(c *Config) {
			c.Addr = "[::1]:6380"
			c.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS13}
		}, nil},
		{"empty addr", func(c *Config) { c.Addr = "" }, []string{"addr"}},
		{"addr without port", func(c *Config) { c.Addr = "localhost" }, []string{"addr"}},
		{"addr without host", func(c *Config) { c.Addr = ":6379" }, []string{"addr"}},
		{"addr port zero", func(c *Config) { c.Addr = "127.0.0.1:0" }, []string{"port"}},
		{"addr port too big", func(c *Config) { c.Addr = "127.0.0.1:65536" }, []string{"port"}},
		{"negative db", func(c *Config) { c.DB = -1 }, []string{"db"}},
		{"tls 1.1", func(c *Config) { c.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS11} }, []string{"tls"}},
		{"zero dial timeout", func(c *Config) { c.DialTimeout = 0 }, []string{"dial timeout"}},
		{"sub-ms command timeout", func(c *Config) { c.CommandTimeout = time.Microsecond }, []string{"command timeout"}},
		{"huge pool timeout", func(c *Config) { c.PoolTimeout = MaxTimeout + time.Millisecond }, []string{"pool timeout"}},
		{"zero pool size", func(c *Config) { c.PoolSize = 0 }, []string{"pool size"}},
		{"huge pool size", func(c *Config) { c.PoolSize = MaxPoolSize + 1 }, []string{"pool size"}},
		{"every violation reported", func(c *Config) { *c = Config{DB: -1} }, []string{"addr", "db", "dial timeout", "command timeout", "pool timeout", "pool size"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := ok
			tt.mutate(&c)
			err := c.Validate()
			if tt.want == nil {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.ErrorIs(t, err, ErrInvalidConfig)
			for _, w := range tt.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

func TestConfigNeverPrintsPassword(t *testing.T) {
	const pw = "hunter2-super-secret-pw"
	c := DefaultConfig("127.0.0.1:6379")
	c.Username = "cache-user"
	c.Password = pw
	c.TLSConfig = &tls.Config{InsecureSkipVerify: true} //nolint:gosec // printed, never dialled
	var logged bytes.Buffer
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("cfg", "config", c)
	outputs := map[string]string{
		"String": c.String(),
		"%v":     fmt.Sprintf("%v", c),
		"%+v":    fmt.Sprintf("%+v", c),
		"%#v":    fmt.Sprintf("%#v", c),
		"%s ptr": fmt.Sprintf("%s", &c),
		"slog":   logged.String(),
	}
	for name, out := range outputs {
		assert.NotContains(t, out, pw, name)
		assert.Contains(t, out, redacted, name)
		assert.Contains(t, out, "cache-user", name)
		assert.Contains(t, out, "insecure", name)
	}
	c.Password = ""
	assert.NotContains(t, c.String(), redacted, "an unset password prints empty")
}

func TestNewClientOptions(t *testing.T) {
	cfg := DefaultConfig("127.0.0.1:1")
	cfg.Username, cfg.Password, cfg.DB = "u", "p", 3
	cfg.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12, ServerName: "cache.internal"}
	cfg.CommandTimeout, cfg.DialTimeout, cfg.PoolTimeout, cfg.PoolSize = 150*time.Millisecond, 300*time.Millisecond, 120*time.Millisecond, 7
	c, err := NewClient(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	o := c.Options()
	// go-redis normalizes MaxRetries -1 to 0 retries in place (0 given by a
	// caller would have become 3).
	assert.Equal(t, 0, o.MaxRetries, "retries disabled")
	assert.Equal(t, 1, o.DialerRetries)
	assert.Equal(t, cfg.DialTimeout, o.DialTimeout)
	assert.Equal(t, cfg.CommandTimeout, o.ReadTimeout)
	assert.Equal(t, cfg.CommandTimeout, o.WriteTimeout)
	assert.True(t, o.ContextTimeoutEnabled)
	assert.Equal(t, 7, o.PoolSize)
	assert.Equal(t, 7, o.MaxActiveConns)
	assert.Equal(t, cfg.PoolTimeout, o.PoolTimeout)
	assert.Equal(t, -1, o.PipelinePoolSize, "no second, unbounded pipeline pool")
	assert.Equal(t, ClientName, o.ClientName)
	assert.Equal(t, "u", o.Username)
	assert.Equal(t, "p", o.Password)
	assert.Equal(t, 3, o.DB)
	assert.Nil(t, o.TLSConfig, "TLS is done by the adapter's one dialer (internal/redisclient)")
	assert.NotNil(t, o.Dialer)
	assert.Nil(t, o.OnConnect, "no handshake probe: the cache profile")
	assert.Equal(t, 3, o.Protocol)
	assert.Equal(t, "cache.internal", cfg.TLSConfig.ServerName, "the caller's tls config is untouched")
}

func TestNewClientRejectsInvalidConfig(t *testing.T) {
	c, err := NewClient(Config{Addr: "127.0.0.1:6379"})
	require.ErrorIs(t, err, ErrInvalidConfig)
	assert.Nil(t, c)
	assert.True(t, errors.Is(err, ErrInvalidConfig))
}
