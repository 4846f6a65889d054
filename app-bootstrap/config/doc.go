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
// opens no connection and starts no goroutine. It must never import fx, a
// Redis client or the adapters; app-bootstrap's wiring package turns a
// Config into clients and modules.
package config
