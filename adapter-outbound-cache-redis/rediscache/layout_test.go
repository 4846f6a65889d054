package rediscache

import (
	"bytes"
	"crypto/rand"
	"errors"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tech-log/tech-log-backend/shared-contract/cache"
)

func TestNewHeaderLayout(t *testing.T) {
	h, err := newHeader(bytes.NewReader(bytes.Repeat([]byte{0xab}, versionBytes)))
	require.NoError(t, err)
	assert.Equal(t, "c1"+strings.Repeat("ab", versionBytes), string(h[:]))
	assert.Equal(t, cache.Token(h[:]), h.token())
	assert.Len(t, h, 34)

	_, err = newHeader(iotest.ErrReader(errors.New("entropy exhausted")))
	require.ErrorContains(t, err, "entropy exhausted")
	_, err = newHeader(bytes.NewReader(make([]byte, versionBytes-1)))
	require.Error(t, err, "a short read is not a version")
}

func TestNewHeaderIsFreshEachTime(t *testing.T) {
	seen := map[header]bool{}
	for range 1000 {
		h, err := newHeader(rand.Reader)
		require.NoError(t, err)
		require.True(t, isHeader(h[:]))
		require.False(t, seen[h], "version repeated")
		seen[h] = true
	}
}

func TestParseToken(t *testing.T) {
	valid := "c1" + strings.Repeat("0123456789abcdef", 2)
	tests := []struct {
		name  string
		token cache.Token
		ok    bool
	}{
		{"valid", cache.Token(valid), true},
		{"empty", "", false},
		{"short", cache.Token(valid[:33]), false},
		{"long", cache.Token(valid + "0"), false},
		{"uppercase hex", cache.Token("c1" + strings.Repeat("0123456789ABCDEF", 2)), false},
		{"wrong layout tag", cache.Token("c2" + valid[2:]), false},
		{"non-hex digit", cache.Token(valid[:33] + "g"), false},
		{"value bytes appended", cache.Token(valid + "value"), false},
		{"nul byte", cache.Token(valid[:20] + "\x00" + valid[21:]), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := parseToken(tt.token)
			if tt.ok {
				require.NoError(t, err)
				assert.Equal(t, tt.token, h.token(), "a token round-trips through its header")
				return
			}
			require.ErrorIs(t, err, cache.ErrInvalidToken)
			if len(tt.token) > 0 {
				assert.NotContains(t, err.Error(), string(tt.token), "the error never echoes the token")
			}
		})
	}
}

func TestDecodeEntry(t *testing.T) {
	h, err := newHeader(bytes.NewReader(bytes.Repeat([]byte{0x01}, versionBytes)))
	require.NoError(t, err)
	tests := []struct {
		name      string
		raw       []byte
		wantValue []byte
		wantErr   bool
	}{
		{"value", encodeEntry(h, []byte("hello")), []byte("hello"), false},
		{"empty value", encodeEntry(h, nil), []byte{}, false},
		{"binary value", encodeEntry(h, []byte{0, 0xff, '\n'}), []byte{0, 0xff, '\n'}, false},
		{"max value", encodeEntry(h, make([]byte, cache.MaxValueLen)), make([]byte, cache.MaxValueLen), false},
		{"over-long", encodeEntry(h, make([]byte, cache.MaxValueLen+1)), nil, true},
		{"short", []byte("c1abc"), nil, true},
		{"foreign string", []byte(strings.Repeat("x", 64)), nil, true},
		{"bad hex in header", append([]byte("c1"+strings.Repeat("z", 32)), "v"...), nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := decodeEntry(tt.raw)
			if tt.wantErr {
				require.ErrorIs(t, err, ErrMalformedEntry)
				assert.False(t, IsInvalidInput(err), "a malformed entry is a backend condition")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.wantValue, e.Value)
			assert.Equal(t, h.token(), e.Token)
		})
	}
}

func TestDecodeEntryCopiesValue(t *testing.T) {
	h, err := newHeader(rand.Reader)
	require.NoError(t, err)
	raw := encodeEntry(h, []byte("abc"))
	e, err := decodeEntry(raw)
	require.NoError(t, err)
	raw[headerLen] = 'X'
	assert.Equal(t, []byte("abc"), e.Value)
}
