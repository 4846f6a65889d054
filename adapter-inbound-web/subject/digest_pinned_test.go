package subject

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/shared-contract/keyspace"
)

// referenceDigest is the subject digest derivation written out
// independently of keyspace: base64url(HMAC-SHA256(secret, uvarint-length
// prefixed Domain, "subject", "web", kind, identity)).
func referenceDigest(secret []byte, kind, identity string) string {
	mac := hmac.New(sha256.New, secret)
	for _, f := range []string{keyspace.Domain, macCapability, macRegion, kind, identity} {
		mac.Write(binary.AppendUvarint(nil, uint64(len(f))))
		mac.Write([]byte(f))
	}
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// TestDigestPinned pins the subject derivation: a change would silently give
// every client a fresh budget (new keys), so it must be a deliberate one.
func TestDigestPinned(t *testing.T) {
	secret := []byte("ssssssssssssssssssssssssssssssss")
	p, err := NewPseudonymizer(testSecret(t, 's'))
	require.NoError(t, err)
	tests := []struct {
		id   Identity
		kind string
		want string
	}{
		{Identity{kind: KindAPIKey, key: "user-api-key-0001"}, macKindAPIKey, "_Ne3MRl0sx82viVjPUWqiB7NULfhPT2lzbGt7iQ0WXk"},
		{Identity{kind: KindIP, addr: netip.MustParseAddr("203.0.113.7")}, macKindIP, "novL1nSK9xikwC-xN5cTtR_1_QLSSgRJnC0_pq4U3kA"},
		{Identity{kind: KindPrincipal, key: "alice"}, macKindPrincipal, "2tDjB0wzvAmWq1J2nlaTq8AzUVNCFAHxyqDUWkSORwI"},
	}
	for _, tt := range tests {
		d, err := p.Digest(tt.id)
		require.NoError(t, err)
		assert.Equal(t, referenceDigest(secret, tt.kind, tt.id.value()), string(d))
		assert.Equal(t, tt.want, string(d))
	}
}
