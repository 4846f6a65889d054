// Package rlsconfig loads envoyproxy/ratelimit's YAML configuration files
// with the reference's semantics (src/config/config_impl.go at the commit
// named in testdata/envoy/NOTICE): the same files are loaded or refused,
// and Match chooses the limit, stats key and counter key the reference's
// GetLimit chooses. Most callers want Load (or LoadDir), then Match (or
// Lookup, for the request's stats key and share_threshold counter) for each
// descriptor of a request and ApplyReplaces over a request's results;
// Limits lists every limit, one policy each, and Match returns those same
// pointers. A descriptor's limit override (RateLimitDescriptor.limit) is
// the server's to honour: it bypasses the configuration, as in GetLimit.
//
// It owns the file format, its two extensions and the matching rules:
//
//   - rate_limit: {policy: <id>} names a policy of our policy file instead
//     of unit and requests_per_unit (mixing them is refused).
//   - rate_limit: {algorithm: <name>, ...} selects another algorithm with
//     its fields (see Algorithm); fixed_window is the default.
//
// The extension keys are valid only directly inside a rate_limit mapping;
// a file without them means exactly what it means to envoyproxy/ratelimit.
// The reference's option to merge one domain across files
// (MERGE_DOMAIN_CONFIG) is not offered: a domain in two files is refused,
// its default.
//
// YAML library: gopkg.in/yaml.v2 v2.4.0, the library and version the
// reference parses with, because acceptance depends on it: yaml.v2 lets a
// later duplicate mapping key win where go.yaml.in/yaml/v3 refuses the
// file; it resolves YAML 1.1 scalars (yes/no/on/off are booleans, so a key
// `on:` is not a string and is refused, and `value: yes` decodes as the
// string "yes"); it keeps timestamps as strings; it coerces any non-binary
// scalar into a string field (value: 42). Decoding with v3 would change
// which files load. It is the module's only YAML library.
//
// It must never import go-redis, fx or another module of the project but
// shared-contract (for the algorithm parameters, ratelimit.Params); the
// gRPC service (package rls) and the reloader (rlsreload) import it, not
// the reverse.
package rlsconfig
