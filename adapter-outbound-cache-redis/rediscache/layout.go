package rediscache

import (
	"encoding/hex"
	"fmt"
	"io"

	"github.com/tech-log/tech-log-backend/shared-contract/cache"
)

// Stored value layout "c1": every cache entry is one Redis string
//
//	"c1" <32 lowercase hex digits: a fresh random 128-bit version> <value bytes>
//
// The first headerLen bytes are the version header. Every write generates a
// new version, so rewriting the same bytes still yields a new header, and a
// key deleted and recreated never reuses one: a token names one write, not
// one value (ABA-safe). The observation token is the header itself.
const (
	// layoutTag opens every header; it changes with the layout.
	layoutTag = "c1"
	// versionBytes is the size of the random version.
	versionBytes = 16
	// headerLen is len(layoutTag) + hex digits of the version.
	headerLen = len(layoutTag) + 2*versionBytes
	// maxStoredLen is the longest stored string: header plus cache.MaxValueLen.
	maxStoredLen = headerLen + cache.MaxValueLen
)

// header is one version header, exactly headerLen bytes.
type header [headerLen]byte

// newHeader returns a header with a fresh version read from r.
func newHeader(r io.Reader) (header, error) {
	var h header
	var v [versionBytes]byte
	if _, err := io.ReadFull(r, v[:]); err != nil {
		return h, fmt.Errorf("read random version: %w", err)
	}
	copy(h[:], layoutTag)
	hex.Encode(h[len(layoutTag):], v[:])
	return h, nil
}

// token returns the observation token for h.
func (h header) token() cache.Token { return cache.Token(h[:]) }

// isHeader reports whether b is exactly a well-formed header.
func isHeader(b []byte) bool {
	if len(b) != headerLen || string(b[:len(layoutTag)]) != layoutTag {
		return false
	}
	for _, c := range b[len(layoutTag):] {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// parseToken returns the header a token stands for, or an error wrapping
// cache.ErrInvalidToken. The error never contains the token.
func parseToken(t cache.Token) (header, error) {
	var h header
	if !isHeader([]byte(t)) {
		return h, fmt.Errorf("%w: token is %d bytes, want a %d-byte %s version", cache.ErrInvalidToken, len(t), headerLen, layoutTag)
	}
	copy(h[:], t)
	return h, nil
}

// encodeEntry returns the stored string for value under h.
func encodeEntry(h header, value []byte) []byte {
	b := make([]byte, 0, headerLen+len(value))
	b = append(b, h[:]...)
	return append(b, value...)
}

// decodeEntry splits a stored string into its entry. It fails, wrapping
// ErrMalformedEntry, on anything this package did not write: a foreign
// string, a short string, an over-long one.
func decodeEntry(raw []byte) (cache.Entry, error) {
	if len(raw) < headerLen || !isHeader(raw[:headerLen]) {
		return cache.Entry{}, fmt.Errorf("%w: stored string of %d bytes has no %s header", ErrMalformedEntry, len(raw), layoutTag)
	}
	if len(raw) > maxStoredLen {
		return cache.Entry{}, fmt.Errorf("%w: stored string exceeds %d bytes", ErrMalformedEntry, maxStoredLen)
	}
	value := make([]byte, len(raw)-headerLen)
	copy(value, raw[headerLen:])
	return cache.Entry{Value: value, Token: cache.Token(raw[:headerLen])}, nil
}
