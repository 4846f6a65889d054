// Package redistest starts a private Redis server for a test, in the spirit of
// net/http/httptest: [Start] returns a [Server] with an address, an admin
// client and fault controls (Kill, Restart, Pause), and removes everything
// with t.Cleanup.
//
// Three lanes sit behind the one API, chosen by the environment:
//
//   - process (default): redis-server from PATH on a free 127.0.0.1 port,
//     no persistence, data directory in t.TempDir().
//   - container (REDIS_TEST_LANE=container): a testcontainers-go Redis
//     container from REDIS_TEST_IMAGE (default tech-log/redis-test:local,
//     built by `make redis-image`; no registry is reachable).
//   - external (REDIS_TEST_ADDR=host:port): a dedicated loopback test server
//     someone else runs; no fault controls, never flushed.
//
// Two topologies run in the process lane only, as loopback processes:
// [StartCluster] (a Redis Cluster, by default 3 primaries + 3 replicas,
// joined with CLUSTER MEET/ADDSLOTSRANGE/REPLICATE) and [StartSentinel] (a
// primary, 2 replicas and 3 redis-sentinel processes). Both wait, bounded,
// until the topology has settled, and count commands that ran over every
// node (CommandCalls) for at-most-once checks.
//
// Start skips the test under `go test -short` and when the lane's
// prerequisite is missing, unless REDIS_REQUIRED=1, in which case a missing
// prerequisite fails the test and names it.
//
// Files: redistest.go (Start, Server, options, lanes), faults.go (the
// faults a test makes: Kill, Restart, Pause, Resume), env.go (which lane
// the environment asks for, and whether a missing server skips or fails),
// process.go (the process lane over package redisserver), container.go
// (the container lane), external.go (the external lane), cluster.go
// (StartCluster over package rediscluster, and what a test reads of it),
// cluster_change.go (what a test changes: Failover, SetSlotNode; and
// ReplicasOf, the replicas a failover picks from), sentinel.go
// (StartSentinel), tls.go and certs.go (WithTLS and its certificates),
// clock.go (WithClock: a server wall clock the test moves, through the
// preloaded clockshim/clockshim.c), stats.go (CommandStats: INFO
// commandstats through redisinfo, summed over a topology's nodes;
// KeyCount), keys.go
// (RandomKeys: a test's own keyspace prefix), load.go (Load: the one
// bounded concurrent load loop), acl.go (DocumentedACLUser: the ACL users
// of docs/operations.md, word for word), ctx.go (AdminCtx: the bounded
// context of a test's admin commands). Subpackage redisserver is the launcher
// without a testing.TB (also used by the demo and the benchmark);
// subpackage rediscluster joins cluster nodes and waits until the cluster
// is healthy (also used by the demo's cluster).
//
// redistest owns the test Redis lifecycle only. It is imported by tests
// (never by production code) and is the only package of the module that may
// import testcontainers-go. Of this module it imports redisinfo (the one
// INFO reader) and its own subpackages only; it must never import the web
// adapter, app-bootstrap or fx.
package redistest
