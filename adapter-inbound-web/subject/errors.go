package subject

import (
	"errors"
	"net/http"
)

// Errors returned by the Identifiers of this package. They never contain a
// header value, a key or an address; callers branch with errors.Is, or map
// them to an HTTP answer with ErrorStatus.
var (
	// ErrUnauthenticated: the request carries no credential the identifier
	// accepts (no X-API-Key, or one that is not in the key set). An
	// embedder's Identifier may return it (wrapped) too. HTTP 401.
	ErrUnauthenticated = errors.New("unauthenticated")
	// ErrAPIKeyAmbiguous: the request carries more than one X-API-Key.
	// HTTP 400.
	ErrAPIKeyAmbiguous = errors.New("more than one x-api-key header")
	// ErrInvalidPrincipal: a principal is empty, too long, not printable
	// ASCII, or its header is repeated. HTTP 400.
	ErrInvalidPrincipal = errors.New("invalid principal")
	// ErrNoClientAddress: RemoteAddr does not hold an IP address. HTTP 500.
	ErrNoClientAddress = errors.New("request remote address is not an ip address")
	// ErrNoIdentity: FromContext found no identity in the request context
	// (Require did not run before it). HTTP 500.
	ErrNoIdentity = errors.New("no identity in the request context")
	// ErrInvalidConfig is wrapped by every configuration error.
	ErrInvalidConfig = errors.New("invalid subject config")
)

// ErrorStatus maps an Identifier's error to the HTTP status and problem
// title the web adapter answers with: 401 for ErrUnauthenticated, 500 for
// ErrNoClientAddress and ErrNoIdentity (deployment errors), 400 for
// anything else (the request is malformed).
func ErrorStatus(err error) (status int, title string) {
	switch {
	case errors.Is(err, ErrUnauthenticated):
		return http.StatusUnauthorized, "unauthenticated"
	case errors.Is(err, ErrNoClientAddress):
		return http.StatusInternalServerError, "client address unavailable"
	case errors.Is(err, ErrNoIdentity):
		return http.StatusInternalServerError, "client identity unavailable"
	}
	return http.StatusBadRequest, "invalid client identity"
}
