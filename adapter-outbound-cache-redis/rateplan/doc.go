// Package rateplan serves plans (issue 36): a subject's plan is set at
// run time by an operator and decides which policy limits it on the routes
// of a base policy (ratelimit.Plans).
//
// An assignment is one small hash per assigned subject (Key: HMAC-named,
// in the subject's Redis Cluster slot; fields FieldPlan and FieldAt); a
// subject without one is on the default plan. Store reads, sets, unsets and
// lists them (tlbctl plan). A change is one optimistic transaction with the
// subject's states: what the subject consumed under the old policy is
// carried into the new one's state and the old state is emptied (ADR 0039),
// so neither a raise nor a stale instance hands out a fresh budget; then
// the change is published on the invalidation channel
// (ratedenial.Channel). Cache is the per-instance table of assignments,
// dropped entry by entry by those invalidations. Port is the EdgePort
// decorator that decides each request by its subject's plan; nothing a
// client sends chooses a plan.
//
// Files: doc.go; store.go (Key, Pattern, Store: Get, List, the stored
// assignment); change.go (Set, Unset, Preview: the carry transaction and
// what it remembers); cache.go (Cache, CacheOptions, CacheStats);
// port.go (Port, NewPort, Observer).
//
// It uses redisrate.StateKey, the programs' Go models (programs.Carry,
// Charge, Consumed) and ratedenial's channel; it must never import the
// provider's internal packages other than internal/invalidation, nor any
// inbound adapter. app-bootstrap composes it.
package rateplan
