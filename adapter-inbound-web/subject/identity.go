package subject

import (
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"net/http"
	"net/netip"
	"net/textproto"
	"strings"

	"github.com/tech-log/tech-log-backend/shared-contract/keyspace"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// Bounds on identities and configuration.
const (
	// MaxForwardedHops is how many X-Forwarded-For entries are examined,
	// right to left, before giving up and using the last trusted hop.
	MaxForwardedHops = 32
	// MaxTrustedProxies bounds the trusted-proxy list.
	MaxTrustedProxies = 256
	// MinIPv6PrefixLen is the shortest IPv6 prefix Config.IPv6PrefixLen
	// accepts: a /32 is already a whole provider allocation.
	MinIPv6PrefixLen = 32
)

// forwardedForKey is the canonical header map key, so that lookups do not
// canonicalize (and allocate) per request.
var forwardedForKey = textproto.CanonicalMIMEHeaderKey("X-Forwarded-For")

// Kind says what an Identity was derived from. The zero value is invalid.
type Kind uint8

// The identity kinds.
const (
	// KindAPIKey: an X-API-Key verified against the configured key set
	// (APIKeys); the value is the key's SHA-256 digest, never the key.
	KindAPIKey Kind = iota + 1
	// KindIP: the client IP address.
	KindIP
	// KindPrincipal: a principal named by an authenticating component, a
	// trusted proxy's header (TrustedHeader) or the embedder's own
	// authentication (NewPrincipal).
	KindPrincipal
)

// String returns "api_key", "ip" or "principal".
func (k Kind) String() string {
	switch k {
	case KindAPIKey:
		return "api_key"
	case KindIP:
		return "ip"
	case KindPrincipal:
		return "principal"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Identity is a client identity read from a request: a verified API key, a
// principal or an IP address. The zero value is invalid (IsZero). It never prints its value: all
// of fmt's verbs, slog and encoding/json see a redacted placeholder. Hand it
// to a Pseudonymizer or use Sum64; the raw value is not exported.
type Identity struct {
	kind Kind
	key  string     // KindAPIKey: the SHA-256 digest; KindPrincipal: the name
	addr netip.Addr // KindIP: unmapped, zone removed, masked to the IPv6 prefix
}

// Kind is what the identity was derived from.
func (id Identity) Kind() Kind { return id.kind }

// IsZero reports whether id was not produced by an Identifier of this
// package or NewPrincipal.
func (id Identity) IsZero() bool { return id.kind == 0 }

// redacted is every textual form of an Identity.
func (id Identity) redacted() string { return "subject.Identity(" + id.kind.String() + ", [redacted])" }

// String implements fmt.Stringer without the value.
func (id Identity) String() string { return id.redacted() }

// GoString implements fmt.GoStringer without the value.
func (id Identity) GoString() string { return id.redacted() }

// Format implements fmt.Formatter so that no verb reaches the fields.
func (id Identity) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(id.redacted())) }

// LogValue implements slog.LogValuer without the value.
func (id Identity) LogValue() slog.Value { return slog.StringValue(id.redacted()) }

// MarshalText implements encoding.TextMarshaler without the value.
func (id Identity) MarshalText() ([]byte, error) { return []byte(id.redacted()), nil }

// Sum64 is a 64-bit hash of the kind and value under seed, for in-process
// tables (the local limiter). With a random per-process seed it reveals
// nothing stable about the identity. It does not allocate.
func (id Identity) Sum64(seed maphash.Seed) uint64 {
	var h maphash.Hash
	h.SetSeed(seed)
	_ = h.WriteByte(byte(id.kind))
	switch id.kind {
	case KindAPIKey, KindPrincipal:
		_, _ = h.WriteString(id.key)
	case KindIP:
		b := id.addr.As16()
		_, _ = h.Write(b[:])
		var bits [1]byte
		if id.addr.Is4() {
			bits[0] = 4
		}
		_, _ = h.Write(bits[:])
	}
	return h.Sum64()
}

// value is the canonical text of the identity fed to the HMAC.
func (id Identity) value() string {
	if id.kind == KindIP {
		return id.addr.String()
	}
	return id.key
}

// DigestLen is the length of every SubjectDigest a Pseudonymizer returns.
const DigestLen = keyspace.DigestLen

// The MAC fields that separate subject digests from every other use of
// keyspace's derivation (capability, region, kind; then the identity).
const (
	macCapability = "subject"
	macRegion     = "web"
	macKindAPIKey = "api-key"
	macKindIP     = "ip"
	// macKindPrincipal separates principals from keys and addresses.
	macKindPrincipal = "principal"
	// macPrefix is the key prefix the Builder needs; it takes no part in
	// the digest.
	macPrefix = "tlb"
)

// ErrZeroIdentity is returned by Digest for an Identity not produced by a
// Resolver.
var ErrZeroIdentity = errors.New("identity is not set")

// Pseudonymizer derives SubjectDigests from Identities under the web subject
// secret. It is safe for concurrent use (the HMAC state is pooled) and prints
// without the secret.
type Pseudonymizer struct {
	b *keyspace.Builder
}

// NewPseudonymizer returns a Pseudonymizer under secret (from
// keyspace.NewSecret: at least keyspace.MinSecretLen bytes).
func NewPseudonymizer(secret keyspace.Secret) (*Pseudonymizer, error) {
	b, err := keyspace.NewBuilder(macPrefix, secret)
	if err != nil {
		return nil, fmt.Errorf("subject secret: %w", err)
	}
	return &Pseudonymizer{b: b}, nil
}

// Digest returns base64url(HMAC-SHA256(secret, Domain, "subject", "web",
// kind, identity)) with every field length-prefixed: DigestLen characters of
// [A-Za-z0-9_-]. An API key and an IP address with the same text yield
// different digests. The error never contains the identity.
func (p *Pseudonymizer) Digest(id Identity) (ratelimit.SubjectDigest, error) {
	var kind string
	switch id.kind {
	case KindAPIKey:
		kind = macKindAPIKey
	case KindIP:
		kind = macKindIP
	case KindPrincipal:
		kind = macKindPrincipal
	default:
		return "", ErrZeroIdentity
	}
	d, err := p.b.Digest(macCapability, macRegion, kind, id.value())
	if err != nil {
		return "", fmt.Errorf("subject digest (%s): %w", id.kind, err)
	}
	// keyspace.Builder.Digest always yields DigestLen base64url characters
	// (its tests assert it), so d is a valid SubjectDigest without a second
	// scan here; the port validates every Request anyway, failing closed.
	return ratelimit.SubjectDigest(d), nil
}

// String implements fmt.Stringer without the secret.
func (p *Pseudonymizer) String() string {
	return "subject.Pseudonymizer(secret=" + keyspace.Redacted + ")"
}

// GoString implements fmt.GoStringer without the secret.
func (p *Pseudonymizer) GoString() string { return p.String() }

// Config configures a Resolver. The zero value is valid: no trusted proxy,
// whole IPv6 addresses.
type Config struct {
	// TrustedProxies lists the networks whose direct connections may set
	// X-Forwarded-For. Empty (the default) means X-Forwarded-For is
	// ignored. At most MaxTrustedProxies entries.
	TrustedProxies []netip.Prefix
	// IPv6PrefixLen groups IPv6 clients by network: 0 or 128 keeps the
	// whole address; 32..127 masks it (64 treats a /64 as one client).
	IPv6PrefixLen int
}

// Validate reports every invalid field, joined; each error wraps
// ErrInvalidConfig and names the field.
func (c Config) Validate() error {
	var errs []error
	if len(c.TrustedProxies) > MaxTrustedProxies {
		errs = append(errs, fmt.Errorf("%w: TrustedProxies has %d entries, max %d", ErrInvalidConfig, len(c.TrustedProxies), MaxTrustedProxies))
	}
	for i, p := range c.TrustedProxies {
		if !p.IsValid() {
			errs = append(errs, fmt.Errorf("%w: TrustedProxies[%d] is not a valid prefix", ErrInvalidConfig, i))
		}
	}
	if c.IPv6PrefixLen != 0 && (c.IPv6PrefixLen < MinIPv6PrefixLen || c.IPv6PrefixLen > 128) {
		errs = append(errs, fmt.Errorf("%w: IPv6PrefixLen %d is neither 0 nor in %d..128", ErrInvalidConfig, c.IPv6PrefixLen, MinIPv6PrefixLen))
	}
	return errors.Join(errs...)
}

// Resolver reads the client Identity of requests. It is immutable and safe
// for concurrent use; build it with NewResolver.
type Resolver struct {
	trusted []netip.Prefix // masked, IPv4-mapped prefixes unmapped
	v6Bits  int
}

// NewResolver validates cfg and returns a Resolver.
func NewResolver(cfg Config) (*Resolver, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	r := &Resolver{v6Bits: cfg.IPv6PrefixLen}
	if r.v6Bits == 0 {
		r.v6Bits = 128
	}
	for _, p := range cfg.TrustedProxies {
		a := p.Addr()
		bits := p.Bits()
		if a.Is4In6() && bits >= 96 {
			a, bits = a.Unmap(), bits-96
		}
		r.trusted = append(r.trusted, netip.PrefixFrom(a.WithZone(""), bits).Masked())
	}
	return r, nil
}

// Identify returns the client IP identity of req (kind KindIP): the direct
// peer, or, when that peer is a trusted proxy, the client X-Forwarded-For
// names. No header other than X-Forwarded-For from a trusted proxy is read:
// in particular X-API-Key is never an identity here (an unverified header
// would let a client pick a fresh identity per request). The only error,
// ErrNoClientAddress, never contains the address.
func (r *Resolver) Identify(req *http.Request) (Identity, error) {
	addr, ok := parseHost(req.RemoteAddr)
	if !ok {
		return Identity{}, ErrNoClientAddress
	}
	if r.isTrusted(addr) {
		addr = r.forwardedClient(req.Header[forwardedForKey], addr)
	}
	return Identity{kind: KindIP, addr: r.normalize(addr)}, nil
}

// forwardedClient walks X-Forwarded-For right to left starting from the
// trusted peer: each trusted hop vouches for the entry to its left. It returns
// the first untrusted address; if an entry is malformed, the chain is longer
// than MaxForwardedHops or every entry is trusted, it returns the last trusted
// address reached (the hop that can be held responsible).
func (r *Resolver) forwardedClient(headers []string, peer netip.Addr) netip.Addr {
	last := peer
	hops := 0
	for i := len(headers) - 1; i >= 0; i-- {
		rest := headers[i]
		for {
			if hops == MaxForwardedHops {
				return last
			}
			var entry string
			if j := strings.LastIndexByte(rest, ','); j >= 0 {
				entry, rest = rest[j+1:], rest[:j]
			} else {
				entry, rest = rest, ""
			}
			hops++
			a, ok := parseHost(strings.TrimSpace(entry))
			if !ok {
				return last
			}
			if !r.isTrusted(a) {
				return a
			}
			last = a
			if rest == "" {
				break
			}
		}
	}
	return last
}

func (r *Resolver) isTrusted(a netip.Addr) bool {
	for _, p := range r.trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

func (r *Resolver) normalize(a netip.Addr) netip.Addr {
	if a.Is6() && r.v6Bits < 128 {
		if p, err := a.Prefix(r.v6Bits); err == nil {
			return p.Addr()
		}
	}
	return a
}

// parseHost accepts "ip", "ip:port", "[ipv6]:port" and "[ipv6]" and returns
// the address unmapped (::ffff:1.2.3.4 is 1.2.3.4) and without a zone.
func parseHost(s string) (netip.Addr, bool) {
	var a netip.Addr
	var err error
	switch {
	case s == "":
		return netip.Addr{}, false
	case s[0] == '[' && s[len(s)-1] == ']':
		a, err = netip.ParseAddr(s[1 : len(s)-1])
	case s[0] == '[' || strings.Count(s, ":") == 1:
		var ap netip.AddrPort
		ap, err = netip.ParseAddrPort(s)
		a = ap.Addr()
	default:
		a, err = netip.ParseAddr(s)
	}
	if err != nil {
		return netip.Addr{}, false
	}
	return a.Unmap().WithZone(""), true
}
