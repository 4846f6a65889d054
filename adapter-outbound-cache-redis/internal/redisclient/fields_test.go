package redisclient

import (
	"crypto/tls"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSettingChecksNameTheField: each shared setting check refuses what it
// must, naming the field as the caller spells it and wrapping the profile's
// error, and accepts the bounds themselves.
func TestSettingChecksNameTheField(t *testing.T) {
	refused := []struct {
		name string
		err  error
		want string
	}{
		{"empty addr", cacheLike.CheckAddr("addr", ""), `addr "" must be host:port`},
		{"addr without port", rateLike.CheckAddr("Addr", "127.0.0.1"), `Addr "127.0.0.1" must be host:port`},
		{"addr without host", rateLike.CheckAddr("Addr", ":6379"), `Addr ":6379" must be host:port`},
		{"port zero", rateLike.CheckAddr("Addr", "h:0"), `Addr "h:0": port must be 1..65535`},
		{"port too big", cacheLike.CheckAddr("addr", "h:65536"), `addr "h:65536": port must be 1..65535`},
		{"port not a number", cacheLike.CheckAddr("addr", "h:x"), `addr "h:x": port`},
		{"tls 1.1", rateLike.CheckTLS("TLSConfig.MinVersion", &tls.Config{MinVersion: tls.VersionTLS11}), "TLSConfig.MinVersion 0x302 must be at least TLS 1.2"},
		{"timeout zero", rateLike.CheckTimeout("CommandTimeout", 0, time.Second), "CommandTimeout 0s must be in 1ms..1s"},
		{"timeout below 1ms", cacheLike.CheckTimeout("command timeout", time.Microsecond, time.Second), "command timeout 1µs must be in 1ms..1s"},
		{"timeout above limit", cacheLike.CheckTimeout("pool timeout", time.Second+1, time.Second), "pool timeout"},
		{"pool size zero", rateLike.CheckPoolSize("PoolSize", 0, 8), "PoolSize 0 must be in 1..8"},
		{"pool size above limit", cacheLike.CheckPoolSize("pool size", 9, 8), "pool size 9 must be in 1..8"},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			require.ErrorIs(t, tc.err, errTestInvalid)
			assert.Contains(t, tc.err.Error(), tc.want)
		})
	}
	for name, err := range map[string]error{
		"addr":            rateLike.CheckAddr("Addr", "[::1]:65535"),
		"no tls":          rateLike.CheckTLS("TLSConfig.MinVersion", nil),
		"tls default":     rateLike.CheckTLS("TLSConfig.MinVersion", &tls.Config{}),
		"tls 1.2":         rateLike.CheckTLS("TLSConfig.MinVersion", &tls.Config{MinVersion: tls.VersionTLS12}),
		"timeout 1ms":     rateLike.CheckTimeout("CommandTimeout", time.Millisecond, time.Second),
		"timeout limit":   rateLike.CheckTimeout("CommandTimeout", time.Second, time.Second),
		"pool size 1":     rateLike.CheckPoolSize("PoolSize", 1, 8),
		"pool size limit": rateLike.CheckPoolSize("PoolSize", 8, 8),
	} {
		assert.NoError(t, err, name)
	}
}
