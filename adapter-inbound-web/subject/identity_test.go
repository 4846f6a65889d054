package subject

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/tech-log/tech-log-backend/shared-contract/keyspace"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// mustPrefixes parses comma-separated CIDRs or bare addresses.
func mustPrefixes(t *testing.T, s string) []netip.Prefix {
	t.Helper()
	var out []netip.Prefix
	for _, f := range strings.Split(s, ",") {
		if strings.Contains(f, "/") {
			out = append(out, netip.MustParsePrefix(f))
			continue
		}
		a := netip.MustParseAddr(f)
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out
}

func TestIdentifyClientIP(t *testing.T) {
	tests := []struct {
		name    string
		trusted string
		v6Bits  int
		remote  string
		xff     []string // one element per X-Forwarded-For header line
		want    string   // expected client address
	}{
		{name: "ipv4 peer", remote: "203.0.113.7:5555", want: "203.0.113.7"},
		{name: "ipv6 peer", remote: "[2001:db8::1]:443", want: "2001:db8::1"},
		{name: "ipv6 peer with zone", remote: "[fe80::1%eth0]:443", want: "fe80::1"},
		{name: "mapped ipv4 peer", remote: "[::ffff:198.51.100.2]:80", want: "198.51.100.2"},
		{name: "bare address", remote: "192.0.2.1", want: "192.0.2.1"},
		{name: "untrusted peer: xff ignored (default none)", remote: "203.0.113.7:1", xff: []string{"1.1.1.1"}, want: "203.0.113.7"},
		{name: "untrusted peer: xff ignored (not in list)", trusted: "10.0.0.0/8", remote: "203.0.113.7:1", xff: []string{"1.1.1.1"}, want: "203.0.113.7"},
		{name: "trusted peer, single entry", trusted: "10.0.0.0/8", remote: "10.0.0.2:1", xff: []string{"198.51.100.9"}, want: "198.51.100.9"},
		{name: "trusted peer: right-most untrusted wins over spoofed left", trusted: "10.0.0.0/8", remote: "10.0.0.2:1", xff: []string{"6.6.6.6, 198.51.100.9, 10.1.1.1"}, want: "198.51.100.9"},
		{name: "trusted peer: several header lines read in order", trusted: "10.0.0.0/8", remote: "10.0.0.2:1", xff: []string{"6.6.6.6, 198.51.100.9", "10.1.1.1,10.2.2.2"}, want: "198.51.100.9"},
		{name: "trusted peer: no xff uses peer", trusted: "10.0.0.0/8", remote: "10.0.0.2:1", want: "10.0.0.2"},
		{name: "trusted peer: every entry trusted uses left-most", trusted: "10.0.0.0/8", remote: "10.0.0.2:1", xff: []string{"10.9.9.9, 10.1.1.1"}, want: "10.9.9.9"},
		{name: "trusted peer: malformed right-most uses peer", trusted: "10.0.0.0/8", remote: "10.0.0.2:1", xff: []string{"198.51.100.9, not-an-ip"}, want: "10.0.0.2"},
		{name: "trusted peer: malformed behind a trusted hop uses that hop", trusted: "10.0.0.0/8", remote: "10.0.0.2:1", xff: []string{"garbage, 10.1.1.1"}, want: "10.1.1.1"},
		{name: "trusted peer: empty entry is malformed", trusted: "10.0.0.0/8", remote: "10.0.0.2:1", xff: []string{"198.51.100.9,,10.1.1.1"}, want: "10.1.1.1"},
		{name: "trusted peer: empty header", trusted: "10.0.0.0/8", remote: "10.0.0.2:1", xff: []string{""}, want: "10.0.0.2"},
		{name: "trusted peer: entry with port", trusted: "10.0.0.0/8", remote: "10.0.0.2:1", xff: []string{"198.51.100.9:4711"}, want: "198.51.100.9"},
		{name: "trusted ipv6 proxy, ipv6 client", trusted: "2001:db8:1::/48", remote: "[2001:db8:1::5]:443", xff: []string{"2001:db8:2::7, 2001:db8:1::9"}, want: "2001:db8:2::7"},
		{name: "trusted ipv6 proxy, bracketed entry", trusted: "2001:db8:1::/48", remote: "[2001:db8:1::5]:443", xff: []string{"[2001:db8:2::7]"}, want: "2001:db8:2::7"},
		{name: "trusted ipv6 proxy, bracketed entry with port", trusted: "2001:db8:1::/48", remote: "[2001:db8:1::5]:443", xff: []string{"[2001:db8:2::7]:80"}, want: "2001:db8:2::7"},
		{name: "trusted ipv4 proxy seen as mapped address", trusted: "10.0.0.2", remote: "[::ffff:10.0.0.2]:1", xff: []string{"198.51.100.9"}, want: "198.51.100.9"},
		{name: "ipv4-mapped trusted prefix", trusted: "::ffff:10.0.0.0/104", remote: "10.0.0.2:1", xff: []string{"198.51.100.9"}, want: "198.51.100.9"},
		{name: "ipv6 /64 grouping", v6Bits: 64, remote: "[2001:db8:1:2:aaaa::1]:1", want: "2001:db8:1:2::"},
		{name: "ipv6 grouping leaves ipv4 alone", v6Bits: 64, remote: "192.0.2.1:1", want: "192.0.2.1"},
		{name: "trusted peer: chain longer than the hop bound", trusted: "10.0.0.0/8", remote: "10.0.0.2:1",
			xff: []string{"198.51.100.9, " + strings.Repeat("10.1.1.1, ", MaxForwardedHops) + "10.3.3.3"}, want: "10.1.1.1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := Config{IPv6PrefixLen: tt.v6Bits}
			if tt.trusted != "" {
				cfg.TrustedProxies = mustPrefixes(t, tt.trusted)
			}
			r, err := NewResolver(cfg)
			require.NoError(t, err)
			req := httptest.NewRequest(http.MethodGet, "/", nil)
			req.RemoteAddr = tt.remote
			for _, v := range tt.xff {
				req.Header.Add("X-Forwarded-For", v)
			}
			id, err := r.Identify(req)
			require.NoError(t, err)
			require.Equal(t, KindIP, id.Kind())
			assert.Equal(t, netip.MustParseAddr(tt.want), id.addr)
		})
	}
}

// TestIdentifyIgnoresAPIKey: X-API-Key, in any form, never becomes the
// identity: rotating it per request must not make a new client.
func TestIdentifyIgnoresAPIKey(t *testing.T) {
	r, err := NewResolver(Config{TrustedProxies: mustPrefixes(t, "10.0.0.0/8")})
	require.NoError(t, err)
	for _, keys := range [][]string{nil, {"k-1"}, {"  k-1 "}, {""}, {"key-aaaa-1", "key-bbbb-2"}, {strings.Repeat("x", 1<<20)}} {
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.RemoteAddr = "10.0.0.2:1"
		req.Header.Set("X-Forwarded-For", "198.51.100.9")
		for _, k := range keys {
			req.Header.Add(APIKeyHeader, k)
		}
		id, err := r.Identify(req)
		require.NoError(t, err, "%d keys", len(keys))
		require.Equal(t, KindIP, id.Kind())
		assert.Equal(t, netip.MustParseAddr("198.51.100.9"), id.addr)
	}
}

func TestIdentifyNoAddress(t *testing.T) {
	r, err := NewResolver(Config{})
	require.NoError(t, err)
	for _, remote := range []string{"", "pipe", "host.example:80", "[]:80", "1.2.3:4"} {
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.RemoteAddr = remote
		_, err := r.Identify(req)
		assert.ErrorIs(t, err, ErrNoClientAddress, "remote %q", remote)
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name  string
		cfg   Config
		field string
	}{
		{name: "zero value is valid", cfg: Config{}},
		{name: "invalid prefix", cfg: Config{TrustedProxies: []netip.Prefix{{}}}, field: "TrustedProxies[0]"},
		{name: "too many proxies", cfg: Config{TrustedProxies: make([]netip.Prefix, MaxTrustedProxies+1)}, field: "TrustedProxies has"},
		{name: "v6 prefix too short", cfg: Config{IPv6PrefixLen: 16}, field: "IPv6PrefixLen"},
		{name: "v6 prefix too long", cfg: Config{IPv6PrefixLen: 129}, field: "IPv6PrefixLen"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			_, nerr := NewResolver(tt.cfg)
			if tt.field == "" {
				require.NoError(t, err)
				require.NoError(t, nerr)
				return
			}
			require.ErrorIs(t, err, ErrInvalidConfig)
			assert.Contains(t, err.Error(), tt.field)
			require.ErrorIs(t, nerr, ErrInvalidConfig)
		})
	}
}

func TestIdentityNeverPrintsValue(t *testing.T) {
	id := Identity{kind: KindAPIKey, key: "sekrit-api-key"}

	var logged strings.Builder
	slog.New(slog.NewTextHandler(&logged, nil)).Info("x", "id", id)
	js, err := json.Marshal(struct{ ID Identity }{id})
	require.NoError(t, err)
	forms := []string{
		fmt.Sprint(id), fmt.Sprintf("%v %+v %#v %s %q %x %d", id, id, id, id, id, id, id),
		logged.String(), string(js), errors.New(id.String()).Error(),
	}
	for _, f := range forms {
		assert.NotContains(t, f, "sekrit")
		assert.Contains(t, f, "redacted")
	}
}

func TestSum64(t *testing.T) {
	r, err := NewResolver(Config{})
	require.NoError(t, err)
	ident := func(key, remote string) Identity {
		if key != "" {
			return Identity{kind: KindAPIKey, key: key}
		}
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.RemoteAddr = remote
		id, err := r.Identify(req)
		require.NoError(t, err)
		return id
	}
	seed := maphash.MakeSeed()
	a := ident("", "192.0.2.1:1")
	assert.Equal(t, a.Sum64(seed), ident("", "192.0.2.1:2").Sum64(seed), "port is not part of the identity")
	assert.Equal(t, a.Sum64(seed), ident("", "[::ffff:192.0.2.1]:2").Sum64(seed), "mapped address is the same client")
	assert.NotEqual(t, a.Sum64(seed), ident("", "192.0.2.2:1").Sum64(seed))
	assert.NotEqual(t, a.Sum64(seed), ident("192.0.2.1", "192.0.2.1:1").Sum64(seed), "api key vs ip of the same text")
	assert.NotEqual(t, a.Sum64(seed), a.Sum64(maphash.MakeSeed()), "seed changes the hash")
	assert.Zero(t, testing.AllocsPerRun(100, func() { _ = a.Sum64(seed) }))
}

// TestIPv6PrefixKeying: with a /64 prefix (the service default) every
// address of one /64 is one subject (one HMAC digest, one local-limiter
// hash), another /64 is another subject, and an IPv4-mapped address is the
// IPv4 client, never masked to its IPv6 /64 (which would make every IPv4
// client one). The peer and a forwarded client are keyed alike.
func TestIPv6PrefixKeying(t *testing.T) {
	secret, err := keyspace.NewSecret([]byte("ipv6-prefix-test-secret-0123456789abcdef"))
	require.NoError(t, err)
	pseudo, err := NewPseudonymizer(secret)
	require.NoError(t, err)
	seed := maphash.MakeSeed()
	type key struct {
		digest string
		sum    uint64
	}
	for _, bits := range []int{64, 48, 128} {
		r, err := NewResolver(Config{IPv6PrefixLen: bits, TrustedProxies: mustPrefixes(t, "10.0.0.1")})
		require.NoError(t, err)
		keyOf := func(remote, xff string) key {
			t.Helper()
			req := httptest.NewRequest(http.MethodGet, "/", nil)
			req.RemoteAddr = remote
			if xff != "" {
				req.Header.Set("X-Forwarded-For", xff)
			}
			id, err := r.Identify(req)
			require.NoError(t, err)
			d, err := pseudo.Digest(id)
			require.NoError(t, err)
			return key{string(d), id.Sum64(seed)}
		}
		a := keyOf("[2001:db8:1:2::1]:1", "")
		sameSlash64 := keyOf("[2001:db8:1:2:ffff:ffff:ffff:fffe]:2", "")
		otherSlash64 := keyOf("[2001:db8:1:3::1]:1", "")
		otherSlash48 := keyOf("[2001:db8:2:2::1]:1", "")
		switch bits {
		case 64:
			assert.Equal(t, a, sameSlash64, "/64: one /64 is one subject")
			assert.NotEqual(t, a, otherSlash64, "/64: another /64 is another subject")
		case 48:
			assert.Equal(t, a, otherSlash64, "/48: two /64s of one /48 are one subject")
			assert.NotEqual(t, a, otherSlash48, "/48: another /48 is another subject")
		case 128:
			assert.NotEqual(t, a, sameSlash64, "/128: every address its own subject")
		}
		assert.Equal(t, a, keyOf("10.0.0.1:9", "[2001:db8:1:2::1]"), "a forwarded client is keyed like a peer")

		v4 := keyOf("192.0.2.1:1", "")
		assert.Equal(t, v4, keyOf("[::ffff:192.0.2.1]:1", ""), "/%d: a mapped address is its IPv4 client", bits)
		assert.Equal(t, v4, keyOf("10.0.0.1:9", "::ffff:192.0.2.1"), "/%d: a forwarded mapped address is its IPv4 client", bits)
		assert.NotEqual(t, v4, keyOf("[::ffff:192.0.2.2]:1", ""), "/%d: mapped addresses are not grouped by an IPv6 prefix", bits)
		assert.NotEqual(t, v4, keyOf("192.0.2.2:1", ""), "/%d: IPv4 addresses are whole", bits)
	}
}
