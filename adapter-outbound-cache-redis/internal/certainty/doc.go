// Package certainty owns the failure certainty of one program call: what a
// go-redis error says about whether the program may have run (Classify),
// which server refusals a sender may follow (Refusal: MOVED, ASK, TRYAGAIN,
// CLUSTERDOWN, and NOSCRIPT), and the readiness reason of a server's
// refusal (ReadinessReason). It recognises server replies through go-redis's
// own predicates (redis.IsMovedError, IsAskError, IsTryAgainError,
// IsClusterDownError, IsAuthError, IsPermissionError, IsLoadingError, ...);
// it parses text only where go-redis has no predicate (NOSCRIPT, BUSY,
// CROSSSLOT, WRONGTYPE and the script-error markers).
//
// Files: doc.go, classify.go (Verdict, Classify, DialError), refusal.go
// (Refusal, IsNoScript, IsServerReply, ReadinessReason).
//
// DialError is internal/redisclient's (the adapter's one dialer marks its
// failures with it), named here as the dial mark Classify reads.
//
// It imports go-redis, internal/redisclient and shared-contract/ratelimit
// only. It must never
// import redisrate, its send or route packages, or app-bootstrap: it is the
// leaf every sender and the provider consult.
package certainty
