// Package ratelease is the lease decorator (ADR 0042): an
// ratelimit.EdgePort that, for a policy with a lease (PolicySpec.Lease),
// reserves several units of a hot subject's budget in one decision
// (Request.Lease) and admits the subject's next requests from them in
// this process, without a round trip, until they are spent or the lease
// ends (Policy.LeaseUntil, measured from when the reservation was sent).
// Unspent units go back by a refund of the reservation's receipt when the
// lease ends or the process stops (Close).
//
// A lease is sized from this process's demand for the subject (the
// requests of its last lease period), at most the lease's MaxUnits, at
// most the budget's remaining times MaxShare: 1 (no lease, one decision
// per request as without the decorator) when demand is low or the budget
// is scarce. Every admission from a lease falls in the window its
// reservation was counted in, or, for an algorithm whose state holds
// leases (AlgorithmSpec.LeaseRecords: a token bucket and GCRA record them
// and never refill into them, a sliding log counts them as admitted at
// their end), within a lease the server holds until its end, so the
// admissions of all processes satisfy the algorithm's bound exactly as
// if each had been decided by the server (AlgorithmSpec.NoLease names
// the algorithms that cannot lease). A reservation names the previous
// lease it replaces (Request.Replaces), so a process holds one record.
//
// Requests with an evaluation ID, policy sets and refunds pass through.
// A process killed holding a lease leaves its unspent units counted until
// its window ends (or its record does): under-admission of at most
// MaxUnits per subject, never over-admission.
//
// Files: leaser.go (Options, New, Evaluate and the lease table),
// giveback.go (ending leases: the sweep, Close). It uses only the
// contract; it must never import the provider or its internal packages.
package ratelease
