package wiring

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-inbound-grpc/rls"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
	"github.com/tech-log/tech-log-backend/app-bootstrap/config"
)

// TestCheckRLS: the paired TLS files config carries are loaded (TLS, and
// mutual TLS with a client CA); a file that does not load is an error
// naming its variable (the CA file when the pair loads); the undecided
// answer maps to the adapter's; the service off is nothing to check.
func TestCheckRLS(t *testing.T) {
	ca := redistest.NewCA(t)
	pair := ca.Issue(t, "rls", redistest.CertOptions{Server: true})
	on := config.RLS{Addr: "127.0.0.1:0", Undecided: "fail-closed"}

	tc, u, err := CheckRLS(on)
	require.NoError(t, err)
	assert.Nil(t, tc, "no TLS files: plaintext")
	assert.Equal(t, rls.UndecidedFailClosed, u)

	withTLS := on
	withTLS.TLSCertFile, withTLS.TLSKeyFile = pair.CertFile, pair.KeyFile
	tc, _, err = CheckRLS(withTLS)
	require.NoError(t, err)
	require.NotNil(t, tc)
	assert.Len(t, tc.Certificates, 1)
	assert.Nil(t, tc.ClientCAs, "no client CA: plain TLS")

	mtls := withTLS
	mtls.TLSClientCAFile = ca.CertFile
	tc, _, err = CheckRLS(mtls)
	require.NoError(t, err)
	assert.NotNil(t, tc.ClientCAs, "mutual TLS")

	notPEM := filepath.Join(t.TempDir(), "not.pem")
	require.NoError(t, os.WriteFile(notPEM, []byte("not pem"), 0o600))
	for name, tt := range map[string]struct {
		r       config.RLS
		wantVar string
		want    error
	}{
		"cert unreadable":   {func() config.RLS { r := on; r.TLSCertFile, r.TLSKeyFile = notPEM, notPEM; return r }(), "APP_RLS_TLS_CERT_FILE", config.ErrInvalid},
		"client ca not pem": {func() config.RLS { r := withTLS; r.TLSClientCAFile = notPEM; return r }(), "APP_RLS_TLS_CLIENT_CA_FILE", config.ErrInvalid},
		"undecided unknown": {func() config.RLS { r := on; r.Undecided = "fail-open"; return r }(), "APP_RLS_UNDECIDED", config.ErrUnsupported},
	} {
		_, _, err := CheckRLS(tt.r)
		var ve *config.VarError
		require.True(t, errors.As(err, &ve), "%s: %v", name, err)
		assert.Equal(t, tt.wantVar, ve.Var, name)
		assert.ErrorIs(t, err, tt.want, name)
	}

	tc, u, err = CheckRLS(config.RLS{})
	assert.NoError(t, err)
	assert.Nil(t, tc)
	assert.Zero(t, u, "the service off: nothing to check")
}

// TestRLSUndecidedValuesMatch pins config's APP_RLS_UNDECIDED values to
// the adapter's: each one config accepts, the adapter parses.
func TestRLSUndecidedValuesMatch(t *testing.T) {
	for _, v := range config.RLSUndecided {
		_, err := rls.ParseUndecided(v)
		assert.NoError(t, err, v)
	}
}
