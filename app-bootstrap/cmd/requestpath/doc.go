// Command requestpath measures which Go files of this repository one
// admitted request runs in, and checks that docs/architecture.md lists
// exactly those files. It is a development tool (make request-path), never
// shipped.
//
// It must be built with coverage over every package of the repository
// (go build -cover -covermode=atomic -coverpkg=github.com/tech-log/tech-log-backend/...).
// It starts a private redis-server on a free loopback port, composes the
// service with wiring.Options on the shipped defaults (the Redis limiter
// enabled with app-bootstrap/examples/policies.json, policy "api", a
// token bucket), sends warm-up requests, then measures Windows windows:
// each clears the coverage counters, sends one GET /api/v1/ping that must
// be admitted, and reads which files ran (go tool covdata). A file counts
// when any of its statements ran in every window (background goroutines
// that run in one window only do not count). With -doc it compares the
// result with the files the document marks **[n]** and exits 1 when they
// differ. It bounds no count: the walk is measured so that the document
// stays true, and how many files a request runs in follows from splitting
// code by concept (issue 34), never the other way round.
//
// Files: doc.go, main.go (the run), measure.go (coverage counters to a
// file set), docs.go (the document's marked files).
//
// It imports app-bootstrap/wiring and the Redis adapter's redisserver; no
// package may import it.
package main
