// Command demo shows the distributed limiter at work: it starts a private
// redis-server on a free 127.0.0.1 port, builds the service and starts two
// instances of it sharing that Redis, drives bounded load at both from a
// few clients, and prints what each instance allowed next to the policy's
// global limit. A second phase stops Redis and shows the instances failing
// closed (503). Everything it starts is stopped and its temporary
// directory removed when it ends, on error and on Ctrl-C too.
//
// Usage (from tools/, as `make demo` does):
//
//	go run ./cmd/demo -root ..
//
// With -cluster (`make demo-cluster`) the instances run against a private
// 3-primary Redis Cluster instead (APP_RATE_LIMIT_REDIS_MODE=cluster), and
// the demo prints how many rate-limit keys each primary holds.
//
// It needs redis-server on PATH (apt-get install redis-server) and the Go
// toolchain. All traffic stays on 127.0.0.1.
//
// Like everything under tools/, it may import any module of the workspace;
// no product module may import it. It runs the real service binary and
// talks to it over HTTP only.
package main
