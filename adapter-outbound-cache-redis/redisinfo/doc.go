// Package redisinfo reads the text of a Redis INFO reply: the fields of any
// section, the server version, the per-command figures of INFO
// commandstats, the role, link and replicas of INFO replication, and the
// figures of CLUSTER INFO (the same text form). It is the one INFO parser of
// the project: the provider's version and server checks, tlbctl, redistest
// and its rediscluster, the tests, the demo and the benchmark use it.
//
// Files: info.go (Parse, Field, CommandStats, ParseVersion),
// replication.go (ParseReplication, Replicas, ParseClusterInfo).
//
// It imports the standard library only and must never import go-redis, the
// contract or another project package: it parses text it is handed.
package redisinfo
