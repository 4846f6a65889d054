// Package ratecarry carries what a subject consumed under a policy's
// previous revision into its new revision's state (issue 36 item 3; ADR
// 0039): a new revision is a new state key (docs/adr/0003), so without it
// a reload hands every subject a fresh budget on top of what it spent.
//
// Carrier is an EdgePort decorator directly above the provider (it also
// serves the local fallback's reconciliation charges, Inner). Before the
// first decision of a subject under a policy with a predecessor (the
// revision this instance served before a reload), it runs one read-only
// program on the subject's two keys (the new one, the predecessor's; one
// Redis Cluster slot): when the new state is missing and the predecessor's
// exists, the new state is seeded, in a second program that checks both
// keys again, with what the predecessor's state consumed (programs.Carry,
// at most the new limit, at least 1), and the predecessor's state is
// charged to empty, so an instance still on the old revision denies
// instead of admitting; a mark key (MarkKey, as long-lived as the emptied
// state) keeps any later check from carrying the emptied state as spent.
// A policy's predecessor is the revision this instance served before a
// reload or, for a process started on the new revision, the one the
// server's Catalog recorded last (Start). Each (policy, subject) is checked
// once per instance (a bounded table);
// later decisions cost nothing. A check that fails lets the decision go
// on (it fails as the check did when the server is down).
//
// Files: doc.go; carrier.go (Carrier, Options, New, MarkKey, the check
// and the seed, Start); catalog.go (Catalog: the revisions served,
// recorded at start); scripts.go (the two programs).
//
// It uses redisrate.StateKey and the programs' Go models; it must never
// import the provider's internal packages or an inbound adapter.
package ratecarry
