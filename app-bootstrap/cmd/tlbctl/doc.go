// Command tlbctl is the operator tool of the distributed rate limiter. It
// reads the same APP_* configuration as the service (package config) and
// talks to the coordination Redis as its own ACL user
// (APP_TLBCTL_REDIS_USERNAME, APP_TLBCTL_REDIS_PASSWORD or
// APP_TLBCTL_REDIS_PASSWORD_FILE; see docs/operations.md):
//
//	tlbctl check
//	tlbctl inspect --policy ID (--api-key K | --ip A)
//	tlbctl reset   --policy ID (--api-key K | --ip A) [--yes]
//
// check verifies connectivity, TLS, the server version, that the programs
// load, the eviction policy, the role and every ACL permission the
// provider's user needs, prints a table and exits 1 on any problem.
// inspect derives the subject's state key with the service's own
// derivation (subject.Pseudonymizer, redisrate.StateKey) and prints the
// decoded state; reset deletes it (only with --yes). Bad input prints one
// line and exits 2 without touching Redis.
//
// It is a main package of app-bootstrap and may import everything the
// service does; nothing imports it.
package main
