package subject

import (
	"context"
	"fmt"
	"net/http"

	"github.com/tech-log/tech-log-backend/adapter-inbound-web/internal/problem"
)

// Identifier reads the client Identity of a request; the edge middleware
// limits by it. Implementations must be safe for concurrent use, must not
// put the raw identity in an error, and must derive the identity from
// something the client cannot choose freely: the client IP (*Resolver, the
// default), a verified credential (*APIKeys), a principal set by an
// authenticating proxy (*TrustedHeader), or the principal the embedder's own
// authentication put in the request context (IdentifierFunc with
// NewPrincipal, or Require with FromContext).
type Identifier interface {
	Identify(r *http.Request) (Identity, error)
}

// IdentifierFunc adapts a function to Identifier. A typical one reads the
// principal an authentication middleware stored in the context:
//
//	subject.IdentifierFunc(func(r *http.Request) (subject.Identity, error) {
//		user, ok := auth.UserFrom(r.Context())
//		if !ok {
//			return subject.Identity{}, subject.ErrUnauthenticated
//		}
//		return subject.NewPrincipal(user.ID)
//	})
type IdentifierFunc func(r *http.Request) (Identity, error)

// Identify calls f(r).
func (f IdentifierFunc) Identify(r *http.Request) (Identity, error) { return f(r) }

var (
	_ Identifier = (*Resolver)(nil)
	_ Identifier = (*APIKeys)(nil)
	_ Identifier = (*TrustedHeader)(nil)
	_ Identifier = IdentifierFunc(nil)
)

// MaxPrincipalLen bounds a principal name in bytes.
const MaxPrincipalLen = 1024

// NewPrincipal returns the identity of the principal name (kind
// KindPrincipal): 1..MaxPrincipalLen bytes of printable ASCII (0x20..0x7e).
// Use it for a principal your authentication has verified; never for a
// value the client sent unchecked. The error wraps ErrInvalidPrincipal and
// does not contain the name.
func NewPrincipal(name string) (Identity, error) {
	if name == "" || len(name) > MaxPrincipalLen {
		return Identity{}, fmt.Errorf("%w: %d bytes, want 1..%d", ErrInvalidPrincipal, len(name), MaxPrincipalLen)
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; c < 0x20 || c > 0x7e {
			return Identity{}, fmt.Errorf("%w: byte %d is not printable ascii", ErrInvalidPrincipal, i)
		}
	}
	return Identity{kind: KindPrincipal, key: name}, nil
}

// identityKey is the context key of the identity Require stores.
type identityKey struct{}

// WithIdentity returns a copy of ctx carrying id, for FromContext.
func WithIdentity(ctx context.Context, id Identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

// IdentityFrom returns the identity WithIdentity stored in ctx.
func IdentityFrom(ctx context.Context) (Identity, bool) {
	id, ok := ctx.Value(identityKey{}).(Identity)
	return id, ok && !id.IsZero()
}

// FromContext is the Identifier of the identity stored in the request
// context by Require or WithIdentity; ErrNoIdentity when there is none.
var FromContext Identifier = IdentifierFunc(func(r *http.Request) (Identity, error) {
	if id, ok := IdentityFrom(r.Context()); ok {
		return id, nil
	}
	return Identity{}, ErrNoIdentity
})

// Require returns next behind ids: a request ids cannot identify is answered
// at once (ErrorStatus: 401 with WWW-Authenticate for ErrUnauthenticated, 400
// or 500 otherwise) with an application/problem+json body naming no value,
// and next does not run; otherwise next runs with the identity in the
// request context (FromContext). Put it in front of the Redis limiter, so
// that an unknown credential costs no Redis state, and behind a per-IP
// guard (localimit), so that a flood of invented credentials from one
// address is throttled before each costs a verification.
func Require(ids Identifier, next http.Handler) http.Handler {
	if ids == nil {
		panic("subject: Require with a nil Identifier")
	}
	if next == nil {
		panic("subject: Require with a nil next handler")
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := ids.Identify(r)
		if err != nil {
			WriteError(w, err)
			return
		}
		next.ServeHTTP(w, r.WithContext(WithIdentity(r.Context(), id)))
	})
}

// Challenge is the WWW-Authenticate value of a 401: the API key goes in the
// X-API-Key header.
const Challenge = `APIKey header="` + APIKeyHeader + `"`

// WriteError answers an Identifier's error as ErrorStatus says, with an
// application/problem+json body and, for 401, WWW-Authenticate naming the
// X-API-Key scheme. Nothing of the request or the error's text is written.
func WriteError(w http.ResponseWriter, err error) {
	status, title := ErrorStatus(err)
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", Challenge)
	}
	problem.Write(w, problem.New(status, title))
}
