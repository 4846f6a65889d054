// Package redisclient builds the go-redis clients of the adapter's two
// capabilities, the rate-limit coordination client (redisrate) and the
// cache client (rediscache): each capability maps its own configuration to
// Options, and every client of every topology is derived from
// Options.Universal, the one go-redis option literal of the adapter.
//
// It owns: the options fixed for every client (no retries or redirects of
// go-redis's own, one dial attempt, read and write timeouts equal to the
// command timeout, no pipeline pool, no CLIENT SETINFO, no maintenance
// notifications, no client-side caching); the dialer (one attempt bounded by
// the dial timeout, TCP keep-alive, the TLS handshake, every failure a
// *DialError, a failed handshake wrapping ErrTLSHandshake) and its TLS
// configuration (cloned, TLS 1.2 at least, each host checked against its
// own name); the handshake probe; the topology constructors (NewClient,
// NewFailoverClient, NewClusterClient, whose NewClient hook builds every
// cluster node client, the ClusterClient's and the provider's router's,
// from the same options); and the checks certainty depends on
// (Profile.CheckClient and CheckCluster, the inverse of the builder) and
// the setting checks both capabilities' configurations share (address,
// address list, master name, TLS version, timeout and pool bounds), each
// error naming the option or field as the capability spells it and
// wrapping the capability's own error.
//
// What is really a capability's own is its Profile: whether the caller's
// context deadline bounds a command, whether dials are capped at the pool
// size, whether each new connection is probed, whether the capability's own
// dial circuit replaces go-redis's (OwnDialFailures), whether dial and pool
// waits must fit in one command timeout. The capabilities never share a
// client, a configuration or a pool: each builds its own from its own
// settings.
//
// Files: doc.go; options.go (Profile, Options, Universal, Simple); dialer.go
// (the dialer, DialError, ErrTLSHandshake, TLS, the handshake probe, the
// dial circuit);
// topology.go (Sentinel, NewClient, NewFailoverClient, NewClusterClient);
// check.go (Limits, CheckClient, CheckCluster: a built client's options);
// fields.go (the setting checks both capabilities' Validate share:
// CheckAddr, CheckTLS, CheckTimeout, CheckPoolSize, CheckAddrs,
// CheckMasterName, ValidAddr).
//
// It imports go-redis and the standard library only. It must never import
// redisrate, rediscache, internal/send, internal/certainty (certainty names
// its DialError), programs, shared-contract or app-bootstrap: it is the leaf
// both capabilities build on.
package redisclient
