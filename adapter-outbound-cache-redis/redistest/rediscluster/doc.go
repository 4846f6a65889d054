// Package rediscluster joins running cluster-enabled redis-server nodes
// into a Redis Cluster and waits, bounded, until it is healthy. It is the
// one cluster bootstrapper of the project: redistest's StartCluster (and its
// WaitHealthy after a failover) and the demo's cluster (`make
// demo-cluster`, tools/cmd/demo) use it. It needs no testing.TB; the nodes
// are started elsewhere (redisserver, redistest).
//
// Files: cluster.go (Join, Healthy, WaitHealthy, SlotOwners, Replication).
//
// It imports the standard library, go-redis, the contract's keyspace (the
// slot count), redisinfo (CLUSTER INFO and INFO replication) and redisserver
// (Poll) only; it must never import testing, testcontainers or a production
// package of this module.
package rediscluster
