package subject

import (
	"fmt"
	"net/http"
	"net/textproto"
	"strings"
)

// TrustedHeader identifies a request by the principal an authenticating
// proxy in front put in a header (for example X-Authenticated-User), but
// only when the request's direct peer is one of the Resolver's trusted
// proxies. From any other peer the header is ignored and the identity is
// the client IP, so a client that reaches the service directly cannot name
// itself. A trusted proxy that sends no (or a blank) header also yields the
// client IP. It is immutable and safe for concurrent use.
type TrustedHeader struct {
	header string // canonical
	ips    *Resolver
}

// NewTrustedHeader returns a TrustedHeader reading header from the trusted
// proxies of ips, which must list at least one. header must be a valid
// field name, and not one the proxy chain itself uses (X-Forwarded-For,
// Forwarded, X-Real-IP, Host) nor X-API-Key.
func NewTrustedHeader(header string, ips *Resolver) (*TrustedHeader, error) {
	if ips == nil || len(ips.trusted) == 0 {
		return nil, fmt.Errorf("%w: the identity header is honoured only from trusted proxies, and none is configured", ErrInvalidConfig)
	}
	if !validFieldName(header) {
		return nil, fmt.Errorf("%w: identity header %q is not a valid field name", ErrInvalidConfig, bounded(header))
	}
	c := textproto.CanonicalMIMEHeaderKey(header)
	switch c {
	case forwardedForKey, "Forwarded", "X-Real-Ip", "Host", apiKeyHeaderKey:
		return nil, fmt.Errorf("%w: identity header %q cannot be %s", ErrInvalidConfig, bounded(header), c)
	}
	return &TrustedHeader{header: c, ips: ips}, nil
}

// Header is the canonical name of the header read.
func (t *TrustedHeader) Header() string { return t.header }

// Identify returns the principal in the header (kind KindPrincipal, see
// NewPrincipal for its syntax) when the direct peer is a trusted proxy and
// the header is present and not blank, else the client IP (as
// Resolver.Identify). The header twice from a trusted proxy, or a value
// NewPrincipal rejects, is ErrInvalidPrincipal.
func (t *TrustedHeader) Identify(r *http.Request) (Identity, error) {
	peer, ok := parseHost(r.RemoteAddr)
	if !ok {
		return Identity{}, ErrNoClientAddress
	}
	if t.ips.isTrusted(peer) {
		switch vals := r.Header[t.header]; {
		case len(vals) > 1:
			return Identity{}, fmt.Errorf("%w: more than one %s", ErrInvalidPrincipal, t.header)
		case len(vals) == 1:
			if v := strings.TrimSpace(vals[0]); v != "" {
				return NewPrincipal(v)
			}
		}
	}
	return t.ips.Identify(r)
}

// validFieldName reports whether s is an RFC 9110 token of at most 128
// bytes.
func validFieldName(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

func bounded(s string) string {
	const max = 64
	if len(s) > max {
		return s[:max] + "..."
	}
	return s
}
