// Package ratelimittest is the conformance kit of ratelimit.EdgePort, in the
// spirit of net/http/httptest: Run checks the behaviour every EdgePort must
// have (outcomes, decision fields, certainty, a denial consumes nothing,
// validation and the deadline precheck), RunSets what every
// EdgePort's EvaluateSet must do (all or nothing, every member reported, a
// denial consuming nothing of the other members; ADR 0027; sets.go), and
// Fake is a scriptable port implementing every method of the one port
// (ADR 0033) for the tests of the port's callers (the web middleware,
// decorators, wiring): a test fake that overrides one method embeds it.
// Clock is a controlled local clock for the decorators' Now options.
//
// It imports the standard library (testing included) and ratelimit only; it
// must never import an adapter, app-bootstrap or a third-party package.
package ratelimittest
