// Package redisinfo reads the text of a Redis INFO reply: the fields of any
// section, the server version, and the per-command figures of
// INFO commandstats. It is the one INFO parser of the project: the provider's
// version check, redistest, the demo and the benchmark use it.
//
// It imports the standard library only and must never import go-redis, the
// contract or another project package: it parses text it is handed.
package redisinfo
