// Package config owns the service's start-up configuration: the APP_
// environment variables (parsed with caarlos0/env/v11), the _FILE variants
// of secrets, the strict JSON policy file, and the validation that turns all
// of it into a typed, immutable Config or a list of errors each naming the
// variable at fault.
//
// Every secret it holds (Redis passwords, key and subject HMAC secrets) is
// redacted in every textual form: String, every fmt verb, slog and JSON.
//
// It reads the environment map and files it is pointed at, nothing else: it
// opens no connection and starts no goroutine. It imports no adapter (ADR
// 0036; the arch rule config-imports-no-adapter, tests included): where an adapter checks the same value, config states the bound
// again (MaxRateLimitPool is redisrate.MaxPoolSize) and wiring's
// TestConfigBounds pins the two equal, so that start-up rejects what an
// adapter would, naming the variable; what only an adapter's rules decide
// (the API keys file's digests, the trusted header's name, the RLS TLS
// files) the wiring checks (wiring.CheckIdentity, wiring.CheckRLS), naming the variable as config does. It
// must never construct an adapter or a Redis client, nor import fx.
// app-bootstrap's wiring package turns a Config into clients and modules.
//
// Files by concern: config.go (Config and its sections), env.go (the APP_
// variables and their parsing), load.go (Load, the bounds), errors.go
// (VarError, VarErrors: one problem per variable), validate_*.go (one
// section each: ratelimit, cache, web, identity, log, redis endpoint,
// topology; validate.go holds the shared field checks), tls.go (TLS
// files), secret.go (Secret, the _FILE variants and ReadSecretFile, the
// one secret-file reader, which tlbctl uses too), policies.go (the policy
// file: ParsePolicies, the set's routes and members), plans.go (the
// file's plans and defaultPlan, by ratelimit.NewPlans' rules), policyjson.go (one
// policy's wire form and its mapping to a ratelimit.PolicySpec, per
// algorithm), policies_keys.go (its unknown and misplaced keys),
// generate.go (go generate: testdata/programs, the programs the service
// sends for the example policy files, ADR 0035).
package config
