// Package ratedenial is the local denial cache (ADR 0022,
// docs/programs.md "Denial cache"): an ratelimit.EdgePort decorator that,
// after the server denied a subject under a policy revision with a
// retry-after R, answers the same subject, policy and revision locally,
// denied, for any cost at least the denied one, until t0 + R - 1ms, where
// t0 is this instance's clock read before the call was sent and the
// millisecond is the programs' flooring of TIME (so the local expiry is
// before the server's). A smaller cost, an expired entry, a
// request with an evaluation ID, another revision and every entry of an
// algorithm that is not exact for it (Exact) go to the port it decorates.
//
// A reset (tlbctl reset) publishes the state key on Channel (Publish);
// every cache given a client subscribes to it and drops that key's entry
// at once. While a cache is not subscribed it neither serves nor records
// anything, and a lost subscription clears it (ADR 0022).
//
// Files: options.go (Options, New, Exact, errors), cache.go (Cache,
// Evaluate: the lookup, the recording and the bounded table, Invalidate,
// Stats), set.go (EvaluateSet: a policy set answered by a member's cached
// denial, and the denying members of a denied set recorded, ADR 0027;
// Refund: passed on, this instance's cached denial of the subject
// dropped, ADR 0025),
// pubsub.go (Channel, Publish, Start and Close of the subscription, its
// loop and its heartbeat). A global policy's entry is its
// ratelimit.GlobalSubject's, shared by every subject.
//
// It uses only the exported API of the port it decorates and
// redisrate.StateKey. It must never import the provider's internal
// packages; app-bootstrap composes it.
package ratedenial
