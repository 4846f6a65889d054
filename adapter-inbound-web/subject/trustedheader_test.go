package subject

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNewTrustedHeaderConfig(t *testing.T) {
	none, err := NewResolver(Config{})
	require.NoError(t, err)
	_, err = NewTrustedHeader("X-Authenticated-User", none)
	require.ErrorIs(t, err, ErrInvalidConfig, "no trusted proxy: the header could come from anyone")
	_, err = NewTrustedHeader("X-Authenticated-User", nil)
	require.ErrorIs(t, err, ErrInvalidConfig)

	ips, err := NewResolver(Config{TrustedProxies: mustPrefixes(t, "10.0.0.0/8")})
	require.NoError(t, err)
	for _, bad := range []string{"", "X Authenticated", "X-User:", strings.Repeat("x", 129), "x-forwarded-for", "Forwarded", "X-Real-IP", "Host", "x-api-key"} {
		_, err := NewTrustedHeader(bad, ips)
		assert.ErrorIs(t, err, ErrInvalidConfig, "%q", bad)
	}
	th, err := NewTrustedHeader("x-authenticated-user", ips)
	require.NoError(t, err)
	assert.Equal(t, "X-Authenticated-User", th.Header())
}

func TestTrustedHeaderIdentify(t *testing.T) {
	ips, err := NewResolver(Config{TrustedProxies: mustPrefixes(t, "10.0.0.0/8")})
	require.NoError(t, err)
	th, err := NewTrustedHeader("X-Authenticated-User", ips)
	require.NoError(t, err)
	alice, err := NewPrincipal("alice")
	require.NoError(t, err)

	req := func(remote string, xff string, users ...string) *http.Request {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = remote
		if xff != "" {
			r.Header.Set("X-Forwarded-For", xff)
		}
		for _, u := range users {
			r.Header.Add("X-Authenticated-User", u)
		}
		return r
	}
	ipOf := func(s string) Identity { return Identity{kind: KindIP, addr: netip.MustParseAddr(s)} }

	for _, c := range []struct {
		name string
		r    *http.Request
		want Identity
		err  error
	}{
		{name: "trusted proxy names the principal", r: req("10.0.0.2:1", "198.51.100.7", "alice"), want: alice},
		{name: "blanks trimmed", r: req("10.0.0.2:1", "", " alice "), want: alice},
		{name: "untrusted peer: header ignored, peer ip", r: req("203.0.113.9:1", "", "alice"), want: ipOf("203.0.113.9")},
		{name: "untrusted peer with xff: both ignored", r: req("203.0.113.9:1", "198.51.100.7", "alice"), want: ipOf("203.0.113.9")},
		{name: "trusted proxy without header: forwarded client ip", r: req("10.0.0.2:1", "198.51.100.7"), want: ipOf("198.51.100.7")},
		{name: "trusted proxy, blank header: client ip", r: req("10.0.0.2:1", "198.51.100.7", "  "), want: ipOf("198.51.100.7")},
		{name: "trusted proxy, header twice", r: req("10.0.0.2:1", "", "alice", "bob"), err: ErrInvalidPrincipal},
		{name: "trusted proxy, control byte", r: req("10.0.0.2:1", "", "ali\x01ce"), err: ErrInvalidPrincipal},
		{name: "no address", r: req("unix", "", "alice"), err: ErrNoClientAddress},
	} {
		t.Run(c.name, func(t *testing.T) {
			id, err := th.Identify(c.r)
			if c.err != nil {
				require.ErrorIs(t, err, c.err)
				assert.NotContains(t, err.Error(), "alice")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, c.want, id)
		})
	}
}
