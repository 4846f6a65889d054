// Package invalidation keeps one pub/sub subscription to an invalidation
// channel alive and checked end to end (ADR 0022): each session
// subscribes to the channel and to a heartbeat channel of its own, and a
// heartbeat published through the client must come back before the next
// one, so a dead connection, a subscription left on a demoted Sentinel
// primary or a cluster bus that does not carry messages ends the session
// within two heartbeats. Its listener is told every payload and every
// change of liveness; a listener that caches must not trust what it
// cached across a change of liveness. The local caches that must hear a reset or a change (ratedenial's
// denials, rateplan's assignments) each own one.
//
// Files: doc.go; subscription.go (Listener, Subscription, New, Start,
// Close, the session loop).
//
// It imports go-redis only; it must never import the rate-limit packages.
package invalidation
