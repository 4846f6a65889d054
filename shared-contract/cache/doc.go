// Package cache is the provider-neutral cache port: a Store of byte values
// under logical Keys, each write with a finite TTL, with observation tokens
// for optimistic compare-and-replace.
//
// Cache semantics differ from rate-limit coordination: a cache may fail open
// (a miss is always a safe answer), coordination never does. The two ports are
// deliberately distinct types so that a cache decorator cannot wrap a
// ratelimit.EdgePort.
//
// It must never import anything outside the Go standard library and package
// keyspace (for segment syntax and bounds); in particular never ratelimit.
package cache
