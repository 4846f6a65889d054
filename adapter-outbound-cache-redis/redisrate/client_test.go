package redisrate

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func validClientConfig() ClientConfig {
	return ClientConfig{
		Addr:           "127.0.0.1:6379",
		Protocol:       ProtocolRESP2,
		CommandTimeout: 250 * time.Millisecond,
		DialTimeout:    100 * time.Millisecond,
		PoolSize:       8,
		PoolTimeout:    50 * time.Millisecond,
	}
}

func TestClientConfigValidate(t *testing.T) {
	tests := []struct {
		name   string
		modify func(*ClientConfig)
		field  string // "" means valid
	}{
		{"valid", func(*ClientConfig) {}, ""},
		{"valid resp3 with tls and name", func(c *ClientConfig) {
			c.Protocol = ProtocolRESP3
			c.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS13}
			c.ClientName = "tlb-coordination"
		}, ""},
		{"empty addr", func(c *ClientConfig) { c.Addr = "" }, "Addr"},
		{"addr without port", func(c *ClientConfig) { c.Addr = "127.0.0.1" }, "Addr"},
		{"addr port zero", func(c *ClientConfig) { c.Addr = "127.0.0.1:0" }, "Addr"},
		{"addr port too big", func(c *ClientConfig) { c.Addr = "127.0.0.1:70000" }, "Addr"},
		{"tls below 1.2", func(c *ClientConfig) { c.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS11} }, "TLSConfig.MinVersion"},
		{"protocol unset", func(c *ClientConfig) { c.Protocol = 0 }, "Protocol"},
		{"protocol 1", func(c *ClientConfig) { c.Protocol = 1 }, "Protocol"},
		{"command timeout zero", func(c *ClientConfig) { c.CommandTimeout = 0 }, "CommandTimeout"},
		{"command timeout negative", func(c *ClientConfig) { c.CommandTimeout = -1 }, "CommandTimeout"},
		{"command timeout too long", func(c *ClientConfig) { c.CommandTimeout = MaxTimeout + time.Millisecond }, "CommandTimeout"},
		{"dial timeout zero", func(c *ClientConfig) { c.DialTimeout = 0 }, "DialTimeout"},
		{"dial timeout above command timeout", func(c *ClientConfig) { c.DialTimeout = time.Second }, "DialTimeout"},
		{"pool timeout zero", func(c *ClientConfig) { c.PoolTimeout = 0 }, "PoolTimeout"},
		{"pool timeout above command timeout", func(c *ClientConfig) { c.PoolTimeout = time.Second }, "PoolTimeout"},
		{"pool size zero", func(c *ClientConfig) { c.PoolSize = 0 }, "PoolSize"},
		{"pool size too big", func(c *ClientConfig) { c.PoolSize = MaxPoolSize + 1 }, "PoolSize"},
		{"client name with space", func(c *ClientConfig) { c.ClientName = "a b" }, "ClientName"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := validClientConfig()
			tt.modify(&c)
			err := c.Validate()
			if tt.field == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.ErrorIs(t, err, ErrInvalidConfig)
			assert.Contains(t, err.Error(), tt.field)
			_, err = NewClient(c)
			assert.ErrorIs(t, err, ErrInvalidConfig, "NewClient validates")
		})
	}
}

func TestClientConfigValidateJoinsAllViolations(t *testing.T) {
	err := ClientConfig{}.Validate()
	require.Error(t, err)
	for _, field := range []string{"Addr", "Protocol", "CommandTimeout", "DialTimeout", "PoolTimeout", "PoolSize"} {
		assert.Contains(t, err.Error(), field)
	}
}

func TestClientConfigNeverPrintsPassword(t *testing.T) {
	const secret = "s3cr3t-passw0rd"
	c := validClientConfig()
	c.Username = "limiter"
	c.Password = secret
	c.Addr = "bad"
	var logged bytes.Buffer
	slog.New(slog.NewTextHandler(&logged, nil)).Info("config", "cfg", c)
	for _, s := range []string{
		c.String(), fmt.Sprintf("%v", c), fmt.Sprintf("%+v", c), fmt.Sprintf("%#v", c), fmt.Sprintf("%s", c),
		logged.String(), c.Validate().Error(),
	} {
		assert.NotContains(t, s, secret)
	}
	assert.Contains(t, c.String(), redacted)
	assert.Contains(t, c.String(), "limiter")
}

// TestNewClientOptions: NewClient maps cfg onto the adapter's one option
// set under the rate profile. The options every profile fixes (no retries,
// one dial attempt, no pipeline pool, no client-side caching, no
// maintenance notifications, ...) are pinned in internal/redisclient; here,
// what cfg and the rate profile decide.
func TestNewClientOptions(t *testing.T) {
	cfg := validClientConfig()
	cfg.Username, cfg.Password, cfg.ClientName = "u", "p", "tlb-coordination"
	client, err := NewClient(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.Close() })
	o := client.Options()

	assert.Equal(t, cfg.Addr, o.Addr)
	assert.Equal(t, "tcp", o.Network)
	assert.Equal(t, ProtocolRESP2, o.Protocol, "protocol is explicit")
	assert.Equal(t, 0, o.MaxRetries, "MaxRetries -1 normalizes to 0 retries (0 would mean 3)")
	assert.Equal(t, cfg.DialTimeout, o.DialTimeout)
	assert.LessOrEqual(t, o.DialTimeout, cfg.CommandTimeout)
	assert.Equal(t, cfg.CommandTimeout, o.ReadTimeout)
	assert.Equal(t, cfg.CommandTimeout, o.WriteTimeout)
	assert.False(t, o.ContextTimeoutEnabled, "rate profile: the caller's deadline is never a socket deadline")
	assert.Equal(t, cfg.PoolSize, o.PoolSize)
	assert.Equal(t, 0, o.MaxActiveConns, "rate profile: dials are not capped beyond the pool")
	assert.Equal(t, cfg.PoolTimeout, o.PoolTimeout)
	assert.NotNil(t, o.OnConnect, "rate profile: handshake probe")
	assert.Equal(t, "u", o.Username)
	assert.Equal(t, "p", o.Password)
	assert.Equal(t, "tlb-coordination", o.ClientName)

	// The provider accepts exactly this client.
	p, err := New(client, testKeys(t), testPolicies(t), Options{CommandTimeout: cfg.CommandTimeout, MaxInFlight: cfg.PoolSize})
	require.NoError(t, err)
	require.NoError(t, p.Close())
}

// TestNewRejectsUnsafeClients: New applies the adapter's shared option
// checks (internal/redisclient tests every one of them; one case here proves
// they are applied), the rate profile's own (the caller's deadline is never
// a socket deadline; dial and pool waits fit in one command timeout) and
// its Options as the limits (CommandTimeout, MaxInFlight).
func TestNewRejectsUnsafeClients(t *testing.T) {
	base := func() *redis.Options { cfg := validClientConfig(); return clientOptions(cfg).Simple(cfg.Addr) }
	opts := Options{CommandTimeout: 250 * time.Millisecond, MaxInFlight: 8}
	tests := []struct {
		name   string
		modify func(*redis.Options)
		want   string
	}{
		{"shared check: retries", func(o *redis.Options) { o.MaxRetries = 2 }, "MaxRetries"},
		{"rate profile: context timeouts", func(o *redis.Options) { o.ContextTimeoutEnabled = true }, "ContextTimeoutEnabled must be false"},
		{"rate profile: dial timeout too long", func(o *redis.Options) { o.DialTimeout = time.Second }, "DialTimeout"},
		{"rate profile: pool timeout too long", func(o *redis.Options) { o.PoolTimeout = time.Second }, "PoolTimeout"},
		{"limits: read timeout differs from CommandTimeout", func(o *redis.Options) { o.ReadTimeout = time.Second }, "ReadTimeout"},
		{"limits: pool smaller than MaxInFlight", func(o *redis.Options) { o.PoolSize = 4 }, "PoolSize"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := base()
			tt.modify(o)
			c := redis.NewClient(o)
			t.Cleanup(func() { _ = c.Close() })
			_, err := New(c, testKeys(t), testPolicies(t), opts)
			require.ErrorIs(t, err, ErrInvalidConfig)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
	t.Run("cluster client not from NewClusterClient", func(t *testing.T) {
		c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}, MaxRetries: -1})
		t.Cleanup(func() { _ = c.Close() })
		_, err := New(c, testKeys(t), testPolicies(t), opts)
		require.ErrorIs(t, err, ErrInvalidConfig)
		assert.Contains(t, err.Error(), "MaxRedirects")
	})
	t.Run("ring client", func(t *testing.T) {
		c := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}})
		t.Cleanup(func() { _ = c.Close() })
		_, err := New(c, testKeys(t), testPolicies(t), opts)
		require.ErrorIs(t, err, ErrUnsupportedClient)
	})
	t.Run("nil client", func(t *testing.T) {
		_, err := New(nil, testKeys(t), testPolicies(t), opts)
		require.ErrorIs(t, err, ErrUnsupportedClient)
	})
}
