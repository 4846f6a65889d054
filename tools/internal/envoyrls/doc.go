// Package envoyrls runs the reference rate limit service,
// envoyproxy/ratelimit's service_cmd and client_cmd (installed by
// `make envoy-rls-bin` into bin/envoy-rls, the version pinned once in the
// Makefile as ENVOY_RLS_VERSION), and our own service with its
// envoy.service.ratelimit.v3 server on, each against a private
// redis-server (package redisserver) on free 127.0.0.1 ports, so that
// tests, `make demo-rls` and `make bench-rls` can put the same requests to
// both.
//
// Every wait is bounded; every process started is stopped by Close (SIGTERM,
// SIGKILL after a bound) and reaped, and its directory removed. All traffic
// stays on loopback.
//
// Files: proc.go (child processes, free ports, bounded polls), bins.go
// (where the binaries are, whether they are required), redis.go (the
// private redis-server), reference.go (service_cmd), ours.go (our service
// binary with APP_RLS_*), client.go (client_cmd and the Go gRPC client),
// window.go (fixed-window alignment).
//
// Like everything under tools/, it may import any module of the workspace;
// it talks to both services over gRPC and HTTP only and never imports the
// reference's code.
package envoyrls
