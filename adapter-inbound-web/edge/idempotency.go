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
// Field"): a Structured Field string, e.g. Idempotency-Key: "8e03978e".
// On a route whose policy has a dedup window, the middleware turns it into
// the request's evaluation ID (an HMAC keyed by the subject), so a retry is
// charged once; on any other route it is ignored (docs/http.md).
const IdempotencyKeyHeader = "Idempotency-Key"

// MaxIdempotencyKeyLen bounds the key's content (the characters between
// the quotes, after unescaping). The draft sets no bound; a UUID is 36.
const MaxIdempotencyKeyLen = 255

var idempotencyKeyKey = textproto.CanonicalMIMEHeaderKey(IdempotencyKeyHeader)

// ErrInvalidIdempotencyKey is wrapped by every error of
// parseIdempotencyKey. No error holds the key or any part of it.
var ErrInvalidIdempotencyKey = errors.New("invalid Idempotency-Key")

// Reasons of ErrInvalidIdempotencyKey; each is also the problem detail of
// the 400 answer, so each is fixed text.
var (
	errKeyRepeated = fmt.Errorf("%w: the header must appear once", ErrInvalidIdempotencyKey)
	errKeyNotSFStr = fmt.Errorf("%w: the value must be one Structured Field string (RFC 8941), e.g. \"8e03978e\"", ErrInvalidIdempotencyKey)
	errKeyEmpty    = fmt.Errorf("%w: the key must not be empty", ErrInvalidIdempotencyKey)
	errKeyTooLong  = fmt.Errorf("%w: the key must be at most %d characters", ErrInvalidIdempotencyKey, MaxIdempotencyKeyLen)
)

// idempotencyKey reads the Idempotency-Key of r: ok is false when the
// header is absent; err is one of the reasons above when it is present but
// not exactly one sf-string of 1..MaxIdempotencyKeyLen characters.
func idempotencyKey(h http.Header) (key string, ok bool, err error) {
	vals, present := h[idempotencyKeyKey]
	if !present {
		return "", false, nil
	}
	if len(vals) != 1 {
		return "", true, errKeyRepeated
	}
	key, err = parseSFString(vals[0])
	return key, true, err
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
