package subject

import "net/http"

// Identifier reads the client Identity of a request; the edge middleware
// limits by it. Implementations must be safe for concurrent use, must not
// put the raw identity in an error, and must derive the identity from
// something the client cannot choose freely: a verified credential, a
// principal set by an authenticating proxy or middleware, or the client IP.
//
// *Resolver (the client IP) is the default.
type Identifier interface {
	Identify(r *http.Request) (Identity, error)
}

// IdentifierFunc adapts a function to Identifier.
type IdentifierFunc func(r *http.Request) (Identity, error)

// Identify calls f(r).
func (f IdentifierFunc) Identify(r *http.Request) (Identity, error) { return f(r) }

var _ Identifier = (*Resolver)(nil)
