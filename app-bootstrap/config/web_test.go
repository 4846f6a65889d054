package config

import (
	"bytes"
	"fmt"
	"log/slog"
	"net/netip"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/shared-contract/keyspace"
)

func TestLoadSecretFiles(t *testing.T) {
	keyFile := writeFile(t, "key", keySecret+"\n")
	subjectFile := writeFile(t, "subject", subjectSecret+"\r\n")
	pwFile := writeFile(t, "pw", redisPassword+"\n\n")
	env := with(enabledEnv(),
		"APP_RATE_LIMIT_KEY_SECRET", "<unset>", "APP_RATE_LIMIT_KEY_SECRET_FILE", keyFile,
		"APP_WEB_SUBJECT_SECRET", "<unset>", "APP_WEB_SUBJECT_SECRET_FILE", subjectFile,
		"APP_RATE_LIMIT_REDIS_PASSWORD_FILE", pwFile)
	cfg, err := Load(env)
	require.NoError(t, err)
	assert.Equal(t, len(keySecret), cfg.RateLimit.KeySecret.Len(), "one trailing newline trimmed")
	assert.Equal(t, len(subjectSecret), cfg.Web.SubjectSecret.Len(), "CRLF trimmed")
	assert.Equal(t, redisPassword+"\n", cfg.RateLimit.Redis.Password.Reveal(), "only one trailing newline is trimmed")

	t.Run("both set", func(t *testing.T) {
		_, err := Load(with(enabledEnv(), "APP_RATE_LIMIT_KEY_SECRET_FILE", keyFile))
		require.Error(t, err)
		ves := VarErrors(err)
		require.Len(t, ves, 1)
		assert.Equal(t, "APP_RATE_LIMIT_KEY_SECRET", ves[0].Var)
		assert.ErrorIs(t, err, ErrConflict)
		assert.Contains(t, err.Error(), "both APP_RATE_LIMIT_KEY_SECRET and APP_RATE_LIMIT_KEY_SECRET_FILE are set")
	})
	t.Run("unreadable", func(t *testing.T) {
		_, err := Load(with(enabledEnv(), "APP_WEB_SUBJECT_SECRET", "<unset>", "APP_WEB_SUBJECT_SECRET_FILE", "/nonexistent/s"))
		require.Error(t, err)
		ves := VarErrors(err)
		require.Len(t, ves, 1)
		assert.Equal(t, "APP_WEB_SUBJECT_SECRET_FILE", ves[0].Var)
	})
	t.Run("short file secret", func(t *testing.T) {
		short := writeFile(t, "short", strings.Repeat("a", 31)+"\n")
		_, err := Load(with(enabledEnv(), "APP_RATE_LIMIT_KEY_SECRET", "<unset>", "APP_RATE_LIMIT_KEY_SECRET_FILE", short))
		require.Error(t, err)
		assert.ErrorIs(t, err, keyspace.ErrSecretTooShort)
		assert.Equal(t, "APP_RATE_LIMIT_KEY_SECRET", VarErrors(err)[0].Var)
	})
	t.Run("empty file", func(t *testing.T) {
		empty := writeFile(t, "empty", "\n")
		_, err := Load(with(enabledEnv(), "APP_RATE_LIMIT_REDIS_PASSWORD_FILE", empty))
		require.Error(t, err)
		assert.Equal(t, "APP_RATE_LIMIT_REDIS_PASSWORD_FILE", VarErrors(err)[0].Var)
	})
}

func TestLoadTrustedProxies(t *testing.T) {
	cfg, err := Load(map[string]string{"APP_WEB_TRUSTED_PROXIES": "10.1.2.3, 192.168.0.0/16,::1 ,"})
	require.NoError(t, err)
	assert.Equal(t, []netip.Prefix{
		netip.MustParsePrefix("10.1.2.3/32"),
		netip.MustParsePrefix("192.168.0.0/16"),
		netip.MustParsePrefix("::1/128"),
	}, cfg.Web.TrustedProxies)
	assert.Empty(t, cfg.Web.BroadTrustedProxies())

	// Broader than /8 (IPv4) or /32 (IPv6): accepted, listed for the
	// start-up warning; mapped prefixes are unmapped first.
	cfg, err = Load(map[string]string{"APP_WEB_TRUSTED_PROXIES": "10.0.0.0/8,64.0.0.0/2,2001:db8::/32,2000::/3,::ffff:10.0.0.0/104,::ffff:0.0.0.0/97"})
	require.NoError(t, err)
	assert.Equal(t, netip.MustParsePrefix("10.0.0.0/8"), cfg.Web.TrustedProxies[4], "mapped prefix unmapped")
	assert.Equal(t, []netip.Prefix{
		netip.MustParsePrefix("64.0.0.0/2"),
		netip.MustParsePrefix("2000::/3"),
		netip.MustParsePrefix("0.0.0.0/1"),
	}, cfg.Web.BroadTrustedProxies())
}

func TestLoadWebListenersAndIPv6Prefix(t *testing.T) {
	cfg, err := Load(map[string]string{"APP_WEB_ADMIN_ADDR": "127.0.0.1:9090", "APP_WEB_IPV6_PREFIX": "56"})
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1:9090", cfg.Web.AdminAddr)
	assert.Equal(t, 56, cfg.Web.IPv6Prefix)
	assert.Contains(t, cfg.String(), "admin_addr=127.0.0.1:9090 ipv6_prefix=56")
	for _, bits := range []string{"32", "128"} {
		cfg, err := Load(map[string]string{"APP_WEB_IPV6_PREFIX": bits})
		require.NoError(t, err, bits)
		assert.Equal(t, bits, strconv.Itoa(cfg.Web.IPv6Prefix))
	}
}

// TestSecretsRedacted: no textual form of the configuration carries a
// secret's value: String, every fmt verb, slog text and JSON.
func TestSecretsRedacted(t *testing.T) {
	env := with(enabledEnv(),
		"APP_RATE_LIMIT_REDIS_PASSWORD", redisPassword,
		"APP_CACHE_ENABLED", "true", "APP_CACHE_REDIS_ADDR", "127.0.0.1:6391",
		"APP_CACHE_REDIS_KEY_SECRET", cacheSecret, "APP_CACHE_REDIS_PASSWORD", redisPassword+"-cache")
	cfg, err := Load(env)
	require.NoError(t, err)
	require.Equal(t, redisPassword, cfg.RateLimit.Redis.Password.Reveal())

	var renderings []string
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X"} {
		renderings = append(renderings,
			fmt.Sprintf(verb, cfg), fmt.Sprintf(verb, &cfg),
			fmt.Sprintf(verb, cfg.RateLimit), fmt.Sprintf(verb, cfg.Web), fmt.Sprintf(verb, cfg.Cache),
			fmt.Sprintf(verb, cfg.RateLimit.Redis), fmt.Sprintf(verb, cfg.RateLimit.Redis.Password),
			fmt.Sprintf(verb, cfg.RateLimit.KeySecret), fmt.Sprintf(verb, cfg.Web.SubjectSecret))
	}
	renderings = append(renderings, cfg.String())
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("cfg", "config", cfg, "rate", cfg.RateLimit, "redis", cfg.RateLimit.Redis, "pw", cfg.RateLimit.Redis.Password)
	slog.New(slog.NewTextHandler(&buf, nil)).Info("cfg", "config", cfg, "web", cfg.Web, "cache", cfg.Cache)
	renderings = append(renderings, buf.String())

	secrets := []string{keySecret, subjectSecret, cacheSecret, redisPassword}
	for _, s := range renderings {
		for _, secret := range secrets {
			require.NotContains(t, s, secret)
			// %x of a leaked secret would be its hex.
			require.NotContains(t, strings.ToLower(s), fmt.Sprintf("%x", secret[:12]))
		}
	}
	assert.Contains(t, cfg.String(), "key_secret="+Redacted)
	assert.Contains(t, cfg.String(), "password="+Redacted)
	assert.Contains(t, buf.String(), Redacted)
}

func TestLoadIdentityModes(t *testing.T) {
	cfg, err := Load(nil)
	require.NoError(t, err)
	assert.Equal(t, IdentityIP, cfg.Web.Identity, "the client IP by default")
	assert.True(t, cfg.Web.LegacyRateLimitHeaders, "the -06 fields are on by default")
	assert.Empty(t, cfg.Web.APIKeysFile)

	// config reads the path; the digests are the wiring's to read
	// (wiring's TestCheckIdentity, ADR 0036).
	keys := writeFile(t, "keys", "# two clients\n"+strings.Repeat("ab", 32)+"\n")
	cfg, err = Load(map[string]string{"APP_WEB_IDENTITY": "api-key", "APP_WEB_API_KEYS_FILE": keys, "APP_WEB_RATELIMIT_LEGACY_HEADERS": "false"})
	require.NoError(t, err)
	assert.Equal(t, IdentityAPIKey, cfg.Web.Identity)
	assert.Equal(t, keys, cfg.Web.APIKeysFile)
	assert.False(t, cfg.Web.LegacyRateLimitHeaders)
	assert.Contains(t, cfg.String(), "identity=api-key api_keys_file="+keys)

	cfg, err = Load(map[string]string{"APP_WEB_IDENTITY": "trusted-header", "APP_WEB_IDENTITY_HEADER": "x-authenticated-user", "APP_WEB_TRUSTED_PROXIES": "10.0.0.0/8"})
	require.NoError(t, err)
	assert.Equal(t, IdentityTrustedHeader, cfg.Web.Identity)
	assert.Equal(t, "X-Authenticated-User", cfg.Web.IdentityHeader)
	assert.Contains(t, cfg.String(), "identity=trusted-header identity_header=X-Authenticated-User")
}

// TestLoadIdentityRejections: each broken identity set-up is one error
// naming the variable at fault, on one line, never echoing a key file line.
// What the web adapter's rules reject (the keys file's content, the
// header's name) is wiring's TestCheckIdentityRejections (ADR 0036).
func TestLoadIdentityRejections(t *testing.T) {
	good := writeFile(t, "good-keys", strings.Repeat("ab", 32)+"\n")
	tests := []struct {
		name    string
		env     map[string]string
		varName string
		err     error
		text    string
	}{
		{"unknown mode", map[string]string{"APP_WEB_IDENTITY": "header"}, "APP_WEB_IDENTITY", ErrUnsupported, "want ip, api-key or trusted-header"},
		{"api-key without file", map[string]string{"APP_WEB_IDENTITY": "api-key"}, "APP_WEB_API_KEYS_FILE", ErrRequired, "SHA-256 key digests"},
		{"keys file in ip mode", map[string]string{"APP_WEB_API_KEYS_FILE": good}, "APP_WEB_API_KEYS_FILE", ErrConflict, "set only with APP_WEB_IDENTITY=api-key"},
		{"header in ip mode", map[string]string{"APP_WEB_IDENTITY_HEADER": "X-User"}, "APP_WEB_IDENTITY_HEADER", ErrConflict, "set only with APP_WEB_IDENTITY=trusted-header"},
		{"trusted-header without header", map[string]string{"APP_WEB_IDENTITY": "trusted-header", "APP_WEB_TRUSTED_PROXIES": "10.0.0.1"}, "APP_WEB_IDENTITY_HEADER", ErrRequired, "X-Authenticated-User"},
		{"trusted-header without trusted proxies", map[string]string{"APP_WEB_IDENTITY": "trusted-header", "APP_WEB_IDENTITY_HEADER": "X-User"}, "APP_WEB_TRUSTED_PROXIES", ErrRequired, "only from trusted proxies"},
		{"legacy headers not a bool", map[string]string{"APP_WEB_RATELIMIT_LEGACY_HEADERS": "maybe"}, "APP_WEB_RATELIMIT_LEGACY_HEADERS", ErrInvalid, "maybe"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(tt.env)
			ves := VarErrors(err)
			require.Len(t, ves, 1, "%v", err)
			assert.Equal(t, tt.varName, ves[0].Var)
			assert.ErrorIs(t, ves[0], tt.err)
			assert.Contains(t, ves[0].Error(), tt.text)
			assert.NotContains(t, ves[0].Error(), "\n", "one line")
			assert.NotContains(t, ves[0].Error(), "raw-secret-api-key-pasted")
		})
	}
}
