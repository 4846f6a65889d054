package wiring

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-inbound-web/subject"
	"github.com/tech-log/tech-log-backend/app-bootstrap/config"
)

func writeTemp(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	return path
}

// TestCheckIdentity: the digests of APP_WEB_API_KEYS_FILE (comments, blank
// lines, either case) and a valid trusted header pass (moved from config's
// TestLoadIdentityModes, ADR 0036).
func TestCheckIdentity(t *testing.T) {
	keyA, keyB := subject.DigestAPIKey("key-a"), subject.DigestAPIKey("key-b")
	keys := writeTemp(t, "keys", "# two clients\n"+keyA.String()+"\n\n"+strings.ToUpper(keyB.String())+"\n")
	cfg, err := config.Load(map[string]string{"APP_WEB_IDENTITY": "api-key", "APP_WEB_API_KEYS_FILE": keys})
	require.NoError(t, err)
	digests, err := CheckIdentity(cfg.Web)
	require.NoError(t, err)
	assert.Equal(t, []subject.APIKeyDigest{keyA, keyB}, digests)

	cfg, err = config.Load(map[string]string{"APP_WEB_IDENTITY": "trusted-header", "APP_WEB_IDENTITY_HEADER": "x-authenticated-user", "APP_WEB_TRUSTED_PROXIES": "10.0.0.0/8"})
	require.NoError(t, err)
	digests, err = CheckIdentity(cfg.Web)
	require.NoError(t, err)
	assert.Nil(t, digests)
	th, err := trustedHeader(cfg.Web, nil)
	require.NoError(t, err)
	assert.Equal(t, cfg.Web.IdentityHeader, th.Header(), "config's canonical form is the adapter's")

	cfg, err = config.Load(nil)
	require.NoError(t, err)
	digests, err = CheckIdentity(cfg.Web)
	require.NoError(t, err)
	assert.Nil(t, digests, "ip mode reads nothing")
}

// TestCheckIdentityRejections: what the web adapter's rules reject is one
// error naming the variable at fault, as config.Load's are: on one line,
// never echoing a key file line (moved from config's
// TestLoadIdentityRejections, ADR 0036).
func TestCheckIdentityRejections(t *testing.T) {
	pasted := writeTemp(t, "pasted-keys", subject.DigestAPIKey("k").String()+"\nraw-secret-api-key-pasted\n")
	empty := writeTemp(t, "empty-keys", "# nobody yet\n")
	tests := []struct {
		name    string
		env     map[string]string
		varName string
		err     error
		text    string
	}{
		{"api-key file missing", map[string]string{"APP_WEB_IDENTITY": "api-key", "APP_WEB_API_KEYS_FILE": "/nonexistent/keys"}, "APP_WEB_API_KEYS_FILE", config.ErrInvalid, "no such file"},
		{"malformed digest line", map[string]string{"APP_WEB_IDENTITY": "api-key", "APP_WEB_API_KEYS_FILE": pasted}, "APP_WEB_API_KEYS_FILE", config.ErrInvalid, "line 2: want a SHA-256 digest of 64 hex digits"},
		{"no digest", map[string]string{"APP_WEB_IDENTITY": "api-key", "APP_WEB_API_KEYS_FILE": empty}, "APP_WEB_API_KEYS_FILE", config.ErrInvalid, "no digest"},
		{"trusted-header bad name", map[string]string{"APP_WEB_IDENTITY": "trusted-header", "APP_WEB_IDENTITY_HEADER": "X User", "APP_WEB_TRUSTED_PROXIES": "10.0.0.1"}, "APP_WEB_IDENTITY_HEADER", config.ErrInvalid, "not a valid field name"},
		{"trusted-header is X-Forwarded-For", map[string]string{"APP_WEB_IDENTITY": "trusted-header", "APP_WEB_IDENTITY_HEADER": "X-Forwarded-For", "APP_WEB_TRUSTED_PROXIES": "10.0.0.1"}, "APP_WEB_IDENTITY_HEADER", config.ErrInvalid, "cannot be X-Forwarded-For"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := config.Load(tt.env)
			require.NoError(t, err, "config reads the values; the adapter's rules are the wiring's")
			_, err = CheckIdentity(cfg.Web)
			ves := config.VarErrors(err)
			require.Len(t, ves, 1, "%v", err)
			assert.Equal(t, tt.varName, ves[0].Var)
			assert.ErrorIs(t, ves[0], tt.err)
			assert.Contains(t, ves[0].Error(), tt.text)
			assert.NotContains(t, ves[0].Error(), "\n", "one line")
			assert.NotContains(t, ves[0].Error(), "raw-secret-api-key-pasted")
			assert.NotContains(t, ves[0].Error(), subject.ErrInvalidConfig.Error(), "the VarError says it is invalid")
		})
	}
}
