// Command tlbctl is the operator tool of the distributed rate limiter. It
// reads the same APP_* configuration as the service, with the service's
// parser and validation (config.Load), so it works on every topology the
// service does (APP_RATE_LIMIT_REDIS_MODE standalone, sentinel or
// cluster), and builds its client with the service's constructor
// (wiring.CoordinationClient). It connects as its own ACL user
// (APP_TLBCTL_REDIS_USERNAME with APP_TLBCTL_REDIS_PASSWORD or
// APP_TLBCTL_REDIS_PASSWORD_FILE, read by config.ReadSecretFile, the
// service's secret-file reader); as the service's user only with
// --use-service-credentials. See docs/operations.md, "Operator CLI".
//
//	tlbctl check
//	tlbctl inspect --policy ID (--api-key-file FILE|- | --principal NAME | --ip A)
//	tlbctl reset   --policy ID (--api-key-file FILE|- | --principal NAME | --ip A) [--yes] [--audit-log FILE]
//	tlbctl plan get|set --plan ID|unset (--api-key-file FILE|- | --principal NAME | --ip A) [--yes] [--audit-log FILE]
//	tlbctl plan list [--plan ID]
//
// check verifies connectivity, TLS, the server version, that the programs
// the service sends for the configured policy file load under the SHA1s
// it sends (each policy's programs rendered with its parameters, ADR
// 0035), the eviction policy, the role and every ACL permission the
// provider's user needs (on every primary in cluster mode), prints a table
// and exits 1 on any problem. inspect derives the subject's state key with
// the service's own derivation (subject.APIKeys, subject.TrustedHeader,
// subject.Resolver, subject.Pseudonymizer, redisrate.StateKey) and prints
// the decoded state; reset deletes it (only with --yes) and writes a JSON
// audit line (the subject's digest, never the subject) to stderr and
// --audit-log. An API key is read from a file or standard input, never
// from argv (--api-key is refused). Bad input prints one line and exits 2
// without touching Redis. plan reads, sets, unsets and lists subjects'
// plans (rateplan.Store: a change carries what the subject consumed, ADR
// 0040), with the same subject input and audit line.
//
// Files: main.go (commands, configuration, credentials, client),
// subject.go (inspect and reset: the command, its input and target),
// resolve.go (the subject derivation: identity, digest and key exactly as
// the service derives them), state.go (the stored state: read, print,
// reset on the key's node), audit.go (the
// audit line and file), check.go (check), scripts.go (check's scripts
// row: the programs the service sends for the configured policies),
// plan.go (plan: its subcommands, preview and list).
//
// It is a main package of app-bootstrap and may import everything the
// service does; nothing imports it.
package main
