package ratelimit

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestBase64URLTable: the lookup table marks exactly the 64 characters of
// the base64url alphabet, as encoding/base64 defines it.
func TestBase64URLTable(t *testing.T) {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	enc := base64.RawURLEncoding.EncodeToString([]byte{0xfb, 0xff, 0xbf}) // uses '-' and '_'
	assert.Equal(t, "-_-_", enc)
	n := 0
	for c := range 256 {
		want := strings.IndexByte(alphabet, byte(c)) >= 0
		assert.Equal(t, want, isBase64URL(byte(c)), "byte %d", c)
		if isBase64URL(byte(c)) {
			n++
		}
	}
	assert.Equal(t, 64, n)
}
