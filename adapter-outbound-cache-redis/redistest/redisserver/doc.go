// Package redisserver starts a private redis-server (or redis-sentinel) child
// process on a free 127.0.0.1 port and stops it again; it does not need a
// testing.TB. It is the one launcher of the project: redistest's process
// lane, tools/cmd/demo and tools/internal/bench use it. INFO replies are
// read with package redisinfo.
//
// It imports the standard library and redisinfo only; it must never import
// go-redis, testing, testcontainers or a production package.
package redisserver
