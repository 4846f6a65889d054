// Package subject owns client identity at the HTTP edge and its
// pseudonymization.
//
// An Identifier reads the identity of a request. The default, a Resolver, is
// the client IP: the direct peer (RemoteAddr) unless that peer is in the
// configured trusted-proxy list; only then is X-Forwarded-For read, right to
// left, and the right-most address that is not itself a trusted proxy is the
// client. No proxy is trusted by default. An unverified header (X-API-Key)
// is never an identity.
//
// A Pseudonymizer turns an Identity into a ratelimit.SubjectDigest: the
// unpadded base64url HMAC-SHA256, under the web subject secret, of a
// domain-separated (kind, identity) pair. The HMAC is the keyspace
// derivation (keyspace.Builder, pooled), used with capability "subject", so
// the secret never leaves keyspace.Secret and the same construction and
// length-prefixing apply as for Redis keys.
//
// The raw identity stays inside this package: Identity prints as a redacted
// placeholder, errors never contain header or address values, and only the
// digest (or a per-process hash, see Identity.Sum64) is handed out.
//
// It imports only the standard library and shared-contract. It must never
// import another adapter, app-bootstrap, fx, go-redis or a metrics library.
package subject
