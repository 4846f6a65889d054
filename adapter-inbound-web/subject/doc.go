// Package subject owns client identity at the HTTP edge and its
// pseudonymization.
//
// An Identifier reads the identity of a request; an unverified header is
// never one. The ready implementations:
//
//   - Resolver (the default): the client IP, the direct peer (RemoteAddr)
//     unless that peer is in the configured trusted-proxy list; only then is
//     X-Forwarded-For read, right to left, and the right-most address that
//     is not itself a trusted proxy is the client. No proxy is trusted by
//     default.
//   - APIKeys: an X-API-Key whose SHA-256 digest is in a configured set
//     (read from a keys file, replaceable at run time), compared in
//     constant time; any other key is ErrUnauthenticated (401).
//   - TrustedHeader: the principal an authenticating proxy put in a header,
//     honoured only from a trusted proxy; from anyone else, the client IP.
//   - IdentifierFunc with NewPrincipal, or Require with FromContext: the
//     embedder's own authentication names the principal.
//
// Require answers an unidentifiable request (problem+json, ErrorStatus) in
// front of the Redis limiter (the service puts the local per-IP guard in
// front of it).
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
// It imports only the standard library, shared-contract and this module's
// internal/problem. It must never
// import another adapter, app-bootstrap, fx, go-redis or a metrics library.
package subject
