package redistest

import (
	"crypto/rand"
	"encoding/hex"
	"testing"

	"github.com/tech-log/tech-log-backend/shared-contract/keyspace"
)

// testSecret is the keyspace secret of RandomKeys (32 bytes, test only).
const testSecret = "redistest-keyspace-secret-0123456789"

// RandomKeys returns a keyspace builder with a random prefix ("t" and 12 hex
// digits) and a fixed test secret: the test's own corner of the keyspace,
// so that tests sharing a server (the external lane is never flushed)
// never meet each other's keys. It fails t when the random source or the
// builder does.
func RandomKeys(t testing.TB) *keyspace.Builder {
	t.Helper()
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		t.Fatalf("redistest: random key prefix: %v", err)
	}
	secret, err := keyspace.NewSecret([]byte(testSecret))
	if err != nil {
		t.Fatalf("redistest: keyspace secret: %v", err)
	}
	keys, err := keyspace.NewBuilder("t"+hex.EncodeToString(b), secret)
	if err != nil {
		t.Fatalf("redistest: keyspace builder: %v", err)
	}
	return keys
}
