// Package redisserver starts a private redis-server (or redis-sentinel) child
// process on a free 127.0.0.1 port and stops it again; it does not need a
// testing.TB. It is the one launcher of the project: redistest's process
// lane, tools/cmd/demo and tools/internal/bench use it. INFO replies are
// read with package redisinfo.
//
// It owns the one retry of a port taken between choosing it and binding it
// ([OnFreePort]; [Process.StartOnFreePort] for a server, with the cluster
// bus port of a cluster node chosen on each attempt too; [Process.Restart]
// on the same port), used by redistest's process and container lanes, its
// sentinels, the demo's cluster and the benchmark.
//
// Files: server.go (Launch, Process, FileTail, Poll: the one bounded wait
// of the topologies); ports.go (FreePort, OnFreePort: the port retry);
// probe.go (the PING and INFO probes over a raw connection, TLS or not);
// sysproc_linux.go, sysproc_other.go (the child's
// process attributes per platform).
//
// It imports the standard library and redisinfo only; it must never import
// go-redis, testing, testcontainers or a production package.
package redisserver
