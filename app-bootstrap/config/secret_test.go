package config

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReadSecretFile: the one reader of secret files drops one trailing
// newline (LF or CRLF), refuses an empty secret and a file larger than
// MaxSecretFileLen, and never puts the content in an error.
func TestReadSecretFile(t *testing.T) {
	for _, tc := range []struct{ name, content, want string }{
		{"plain", "s3cret", "s3cret"},
		{"lf", "s3cret\n", "s3cret"},
		{"crlf", "s3cret\r\n", "s3cret"},
		{"one newline only", "s3cret\n\n", "s3cret\n"},
		{"inner spaces kept", " s3 cret ", " s3 cret "},
		{"at the limit", strings.Repeat("x", MaxSecretFileLen), strings.Repeat("x", MaxSecretFileLen)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := ReadSecretFile(writeFile(t, "s", tc.content))
			require.NoError(t, err)
			assert.Equal(t, tc.want, s.Reveal())
		})
	}
	for _, tc := range []struct{ name, content, want string }{
		{"empty", "", "is empty"},
		{"only a newline", "\n", "is empty"},
		{"only crlf", "\r\n", "is empty"},
		{"too large", strings.Repeat("x", MaxSecretFileLen+1), "is larger than 65536 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFile(t, "s", tc.content)
			_, err := ReadSecretFile(path)
			require.Error(t, err)
			assert.Contains(t, err.Error(), path+" "+tc.want)
			assert.NotContains(t, err.Error(), "xxxx")
		})
	}
	_, err := ReadSecretFile("/nonexistent/secret")
	assert.ErrorContains(t, err, "no such file")

	s, err := ReadSecret(strings.NewReader("from-stdin\n"), "standard input")
	require.NoError(t, err)
	assert.Equal(t, "from-stdin", s.Reveal())
	_, err = ReadSecret(strings.NewReader(""), "standard input")
	assert.EqualError(t, err, "standard input is empty")
}
