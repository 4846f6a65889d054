package config

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLoadRLSOffByDefault(t *testing.T) {
	cfg, err := Load(enabledEnv())
	require.NoError(t, err)
	assert.False(t, cfg.RLS.Enabled())
	assert.Equal(t, RLS{}, cfg.RLS)
	assert.Contains(t, cfg.String(), "rls{enabled=false}")
}

func TestLoadRLS(t *testing.T) {
	dir := t.TempDir()
	cfg, err := Load(with(enabledEnv(), "APP_RLS_ADDR", "127.0.0.1:8081", "APP_RLS_CONFIG_DIR", dir,
		"APP_RLS_HTTP_ADDR", "127.0.0.1:8082", "APP_RLS_UNDECIDED", "error", "APP_RLS_SHADOW_MODE", "true"))
	require.NoError(t, err)
	r := cfg.RLS
	assert.True(t, r.Enabled())
	assert.Equal(t, "127.0.0.1:8081", r.Addr)
	assert.Equal(t, "127.0.0.1:8082", r.HTTPAddr)
	assert.Equal(t, dir, r.ConfigDir)
	assert.Equal(t, "error", r.Undecided)
	assert.True(t, r.ShadowMode)
	assert.False(t, r.TLS())
	assert.Contains(t, cfg.String(), "rls{enabled=true addr=127.0.0.1:8081")

	cfg, err = Load(with(enabledEnv(), "APP_RLS_ADDR", ":8081", "APP_RLS_CONFIG_DIR", dir))
	require.NoError(t, err)
	assert.Equal(t, "fail-closed", cfg.RLS.Undecided, "the default")
	assert.False(t, cfg.RLS.ShadowMode)
}

func TestLoadRLSRejections(t *testing.T) {
	dir := t.TempDir()
	file := writeFile(t, "f.yaml", "domain: x\n")
	on := func(kv ...string) map[string]string {
		return with(with(enabledEnv(), "APP_RLS_ADDR", "127.0.0.1:8081", "APP_RLS_CONFIG_DIR", dir), kv...)
	}
	tests := []struct {
		name     string
		env      map[string]string
		variable string
		sentinel error
		contains string
	}{
		{"limiter off", with(on(), "APP_RATE_LIMIT_ENABLED", "false"), "APP_RLS_ADDR", ErrConflict, "APP_RATE_LIMIT_ENABLED=true"},
		{"addr malformed", on("APP_RLS_ADDR", "nope"), "APP_RLS_ADDR", ErrInvalid, "want [host]:port"},
		{"addr is the web's", on("APP_RLS_ADDR", ":8080"), "APP_RLS_ADDR", ErrConflict, "APP_WEB_ADDR"},
		{"no config dir", on("APP_RLS_CONFIG_DIR", "<unset>"), "APP_RLS_CONFIG_DIR", ErrRequired, "rule files"},
		{"config dir missing", on("APP_RLS_CONFIG_DIR", dir+"/nope"), "APP_RLS_CONFIG_DIR", ErrInvalid, "no such file"},
		{"config dir a file", on("APP_RLS_CONFIG_DIR", file), "APP_RLS_CONFIG_DIR", ErrInvalid, "not a directory"},
		{"http addr is the web's", on("APP_WEB_ADDR", "127.0.0.1:9000", "APP_RLS_HTTP_ADDR", "127.0.0.1:9000"), "APP_RLS_HTTP_ADDR", ErrConflict, "APP_WEB_ADDR"},
		{"http addr is the admin's", on("APP_WEB_ADMIN_ADDR", "127.0.0.1:9001", "APP_RLS_HTTP_ADDR", "127.0.0.1:9001"), "APP_RLS_HTTP_ADDR", ErrConflict, "APP_WEB_ADMIN_ADDR"},
		{"http addr is the grpc's", on("APP_RLS_HTTP_ADDR", "127.0.0.1:8081"), "APP_RLS_HTTP_ADDR", ErrConflict, "APP_RLS_ADDR"},
		{"http addr without addr", with(enabledEnv(), "APP_RLS_HTTP_ADDR", "127.0.0.1:8082"), "APP_RLS_ADDR", ErrRequired, "APP_RLS_HTTP_ADDR is set"},
		{"undecided unknown", on("APP_RLS_UNDECIDED", "fail-open"), "APP_RLS_UNDECIDED", ErrUnsupported, "fail-closed or error"},
		{"shadow not a bool", on("APP_RLS_SHADOW_MODE", "maybe"), "APP_RLS_SHADOW_MODE", ErrInvalid, `"maybe"`},
		{"cert without key", on("APP_RLS_TLS_CERT_FILE", file), "APP_RLS_TLS_KEY_FILE", ErrRequired, "CERT_FILE is set"},
		{"key without cert", on("APP_RLS_TLS_KEY_FILE", file), "APP_RLS_TLS_CERT_FILE", ErrRequired, "KEY_FILE is set"},
		{"client ca alone", on("APP_RLS_TLS_CLIENT_CA_FILE", file), "APP_RLS_TLS_CLIENT_CA_FILE", ErrConflict, "TLS_CERT_FILE"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(tt.env)
			require.Error(t, err)
			var found *VarError
			for _, ve := range VarErrors(err) {
				if ve.Var == tt.variable && errors.Is(ve, tt.sentinel) {
					found = ve
				}
			}
			require.NotNil(t, found, "want %s (%v) in: %v", tt.variable, tt.sentinel, err)
			assert.Contains(t, found.Error(), tt.contains)
		})
	}
}

// TestLoadRLSTLS: config carries the paired TLS files as they are (the
// wiring loads them: wiring.TestCheckRLS) and prints whether TLS is on.
func TestLoadRLSTLS(t *testing.T) {
	dir := t.TempDir()
	base := with(enabledEnv(), "APP_RLS_ADDR", "127.0.0.1:8081", "APP_RLS_CONFIG_DIR", dir,
		"APP_RLS_TLS_CERT_FILE", "/c.pem", "APP_RLS_TLS_KEY_FILE", "/k.pem")
	cfg, err := Load(base)
	require.NoError(t, err)
	assert.True(t, cfg.RLS.TLS())
	assert.Equal(t, "/c.pem", cfg.RLS.TLSCertFile)
	assert.Equal(t, "/k.pem", cfg.RLS.TLSKeyFile)
	assert.Empty(t, cfg.RLS.TLSClientCAFile)

	cfg, err = Load(with(base, "APP_RLS_TLS_CLIENT_CA_FILE", "/ca.pem"))
	require.NoError(t, err)
	assert.Equal(t, "/ca.pem", cfg.RLS.TLSClientCAFile)
	assert.Contains(t, cfg.String(), "tls=true mtls=true")
}
