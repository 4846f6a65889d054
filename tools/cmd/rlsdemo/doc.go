// Command rlsdemo shows our service answering Envoy's rate limit protocol:
// it starts a private redis-server on a free 127.0.0.1 port, builds the
// service and starts it with APP_RLS_ADDR, APP_RLS_HTTP_ADDR and
// APP_RLS_CONFIG_DIR over a small envoyproxy/ratelimit YAML (5 requests
// per user per minute, an unlimited key), and sends requests through the
// reference's own client, envoyproxy/ratelimit's client_cmd
// (`make envoy-rls-bin`), and through POST /json: one user through each,
// then the first user again through the other transport (one state behind
// both), and the unlimited key. It prints every answer and exits non-zero
// when a limit does not hold: a user admitted beyond its limit, or no
// denial where one is due.
//
// Usage (from tools/, as `make demo-rls` does):
//
//	go run ./cmd/rlsdemo -root ..
//
// With -reference it runs the same script against the reference's
// service_cmd instead of our service (a check of the script itself).
//
// Everything it starts is stopped when it ends, on error and on Ctrl-C
// too; all traffic stays on 127.0.0.1.
package main
