// Package rediscache is the Redis implementation of cache.Store: a
// best-effort byte cache with finite TTLs and exact (ABA-safe) observation
// tokens, over its own go-redis client built by NewClient from its own
// Config. It also owns FailOpen, the decorator that turns backend failures
// into misses and no-ops, and the small scalar script executor the cache's
// compare-and-replace program runs through.
//
// It owns: the physical cache key (keyspace capability "cache"), the stored
// value layout (a versioned header followed by the value), the token format,
// and compare_and_replace.lua.
//
// Its client is built by internal/redisclient, the adapter's one option
// builder, dialer and topology constructor, from the cache's own Config and
// profile (the caller's deadline honoured, dials capped at the pool, RESP3,
// CLIENT SETNAME tlb-cache).
//
// Files: doc.go; config.go (Config, DefaultConfig, NewClient, the cache's
// profile and option mapping); topology.go (NewFailoverClient,
// NewClusterClient); store.go (Store, New, the physical key); layout.go
// (the stored value layout and token); script.go (the scalar script
// executor over compare_and_replace.lua); failopen.go (FailOpen).
//
// It imports shared-contract, internal/redisclient and go-redis. It must
// never import redisrate, the rate-limit programs or executors, any
// inbound adapter, app-bootstrap or fx, and it must never be handed the
// coordination client: coordination fails closed, the cache fails open, and
// the two never share a connection, a config or a decorator.
package rediscache
