// Package localimit owns the legacy in-process limiter: one token bucket per
// client IP (golang.org/x/time/rate) in a bounded client table, and the HTTP
// middleware that answers 429 with Retry-After and the RateLimit fields of
// the bucket when a client's bucket is empty. The client is always its IP,
// never a header (an IPv6 address masked to the Resolver's prefix): it is
// the per-IP guard in front of identity verification and the edge in every
// identity mode. It is the compatibility path kept until the separate inbound
// migration; it makes no distributed claim (every process has its own table).
//
// The table holds at most Config.MaxClients entries, split into shards with a
// least-recently-used list each. Inserting into a full shard evicts its least
// recently used client and entries idle longer than Config.IdleTTL are dropped
// as the table is touched, so a flood of distinct clients cannot grow memory
// past the cap and every eviction is O(1). Clients are keyed by a 64-bit
// hash under a random per-process seed; raw identities are not stored.
//
// Its types never cross into another module's API except through
// http.Handler. It imports only the standard library, golang.org/x/time and
// this module's subject, internal/fields and internal/problem packages; it must never import shared-contract's
// providers, another adapter, app-bootstrap, fx, go-redis or a metrics
// library.
package localimit
