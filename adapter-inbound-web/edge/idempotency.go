package edge

import (
	"errors"
	"fmt"
	"net/http"
	"net/textproto"
	"strings"
)

// IdempotencyKeyHeader is the request header a client names a retryable
// request with (IETF httpapi draft "The Idempotency-Key HTTP Header
// Field"): a Structured Field string, e.g. Idempotency-Key: "8e03978e", or
// the bare key most clients send, e.g. Idempotency-Key: 8e03978e; both
// forms of the same characters are one key. On a route whose policy has a dedup window, the middleware turns it into
// the request's evaluation ID (an HMAC keyed by the subject), so a retry is
// charged once; on any other route it is ignored (docs/http.md).
const IdempotencyKeyHeader = "Idempotency-Key"

// MaxIdempotencyKeyLen bounds the key's content (the bare key, or the
// characters between the quotes after unescaping). The draft sets no
// bound; a UUID is 36.
const MaxIdempotencyKeyLen = 255

var idempotencyKeyKey = textproto.CanonicalMIMEHeaderKey(IdempotencyKeyHeader)

// ErrInvalidIdempotencyKey is wrapped by every error of
// parseIdempotencyKey. No error holds the key or any part of it.
var ErrInvalidIdempotencyKey = errors.New("invalid Idempotency-Key")

// Reasons of ErrInvalidIdempotencyKey; each is also the problem detail of
// the 400 answer, so each is fixed text.
var (
	errKeyRepeated = fmt.Errorf("%w: the header must appear once", ErrInvalidIdempotencyKey)
	errKeyNotSFStr = fmt.Errorf("%w: a quoted value must be one Structured Field string (RFC 8941), e.g. \"8e03978e\"", ErrInvalidIdempotencyKey)
	errKeyBadToken = fmt.Errorf("%w: an unquoted key must be visible ASCII characters other than '\"' and '\\' (no spaces), e.g. 8e03978e", ErrInvalidIdempotencyKey)
	errKeyEmpty    = fmt.Errorf("%w: the key must not be empty", ErrInvalidIdempotencyKey)
	errKeyTooLong  = fmt.Errorf("%w: the key must be at most %d characters", ErrInvalidIdempotencyKey, MaxIdempotencyKeyLen)
)

// idempotencyKey reads the Idempotency-Key of r: ok is false when the
// header is absent; err is one of the reasons above when it is present but
// not exactly one key (parseIdempotencyKey).
func idempotencyKey(h http.Header) (key string, ok bool, err error) {
	vals, present := h[idempotencyKeyKey]
	if !present {
		return "", false, nil
	}
	if len(vals) != 1 {
		return "", true, errKeyRepeated
	}
	key, err = parseIdempotencyKey(vals[0])
	return key, true, err
}

// parseIdempotencyKey parses one Idempotency-Key value: surrounding spaces
// are discarded; a value starting with '"' is an sf-string (parseSFString);
// any other is a bare key of 1..MaxIdempotencyKeyLen visible ASCII
// characters (%x21-7E) other than '"' and '\', taken as it is. So the bare
// key abc123 and the sf-string "abc123" are the same key, and every bare
// key has exactly one sf-string of the same content (keys with spaces, '"'
// or '\' need the sf-string).
func parseIdempotencyKey(v string) (string, error) {
	v = strings.Trim(v, " ")
	if v == "" {
		return "", errKeyEmpty
	}
	if v[0] == '"' {
		return parseSFString(v)
	}
	if len(v) > MaxIdempotencyKeyLen {
		return "", errKeyTooLong
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; c <= 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return "", errKeyBadToken
		}
	}
	return v, nil
}

// parseSFString parses an RFC 8941 Item that must be a bare String
// (section 4.2.5): surrounding spaces are discarded; the content is
// printable ASCII (%x20-7E) with '"' and '\' escaped by '\'; nothing may
// follow the closing quote (parameters are not accepted: the draft defines
// none).
func parseSFString(v string) (string, error) {
	v = strings.Trim(v, " ")
	if len(v) < 2 || v[0] != '"' {
		return "", errKeyNotSFStr
	}
	var b strings.Builder
	for i := 1; i < len(v); i++ {
		c := v[i]
		switch {
		case c == '\\':
			i++
			if i >= len(v) || (v[i] != '"' && v[i] != '\\') {
				return "", errKeyNotSFStr
			}
			c = v[i]
		case c == '"':
			if i != len(v)-1 {
				return "", errKeyNotSFStr
			}
			if b.Len() == 0 {
				return "", errKeyEmpty
			}
			return b.String(), nil
		case c < 0x20 || c > 0x7e:
			return "", errKeyNotSFStr
		}
		if b.Len() >= MaxIdempotencyKeyLen {
			return "", errKeyTooLong
		}
		b.WriteByte(c)
	}
	return "", errKeyNotSFStr // no closing quote
}
