// Package send is the one send path of the Redis rate-limit provider: the
// send loop over targets and what it reports.
//
// A target is one primary endpoint: its client, its batcher, its
// qualification state, its in-flight bound and its circuit breaker. A route gives the loop the
// key's target: one fixed target for a standalone or Sentinel endpoint, or
// the cluster's slot map of primaries (qualified before their first call by
// the provider's qualification function). The loop takes one of the target's
// in-flight tokens (none left: not sent), admits the call through the
// target's breaker, sends it (batched with other waiting calls on a
// first attempt), follows NOSCRIPT with exactly one EVAL and, in a cluster,
// MOVED, ASK, TRYAGAIN and CLUSTERDOWN while the caller's sendBy allows, and
// returns one typed result: NotSent (with its reason), MayHaveRun (with its
// cause) or Replied (with the reply or error reply). Nothing that may have
// run is ever sent again.
//
// Files: doc.go; call.go (Call, what a caller asks to send: script,
// keys, ARGV and the entries its per-call values replace, sendBy, an
// optional charge); sent.go (the typed result); errors.go (the errors it
// reports); executor.go (Executor, Script, the wire argument, one command
// sent and collected); loop.go (the send loop, Target, its in-flight
// bound, the route interface, the fixed route); cluster.go
// (ClusterRouter: the slot map, node clients, qualification);
// cluster_route.go (the cluster as a route); batch.go (the per-target
// batcher); breaker.go (a breaker per target: one circuit breaker, its
// prober, what a send counts for); precharge.go (a charge pipelined ahead
// of a program call, first attempt only); settings.go (New, the settings
// the provider makes before the first call, what it reads back: pipeline
// counters, the breaker options, states and trips, Target.Addr and
// Client; ShutdownBreakers).
//
// On the shipped defaults one call without a charge runs statements of
// loop.go, breaker.go, batch.go and executor.go only (docs/architecture.md,
// make request-path).
//
// It does not know a program's ARGV layout: the caller names the entries
// that Call.Cost, Call.EvalID and PreCharge.Units replace (the programs
// package's positions), and the KEYS count is the number of keys given.
//
// It imports go-redis, gobreaker, internal/certainty, programs (a Script is
// built from a programs.Program; no argument position) and shared-contract
// (ratelimit categories, keyspace slots). It must never import redisrate or app-bootstrap: the
// provider calls it, never the reverse (qualification is a function the
// provider hands the cluster router).
package send
