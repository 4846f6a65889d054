// Package reliability holds the reliability and security lanes of the Redis
// adapter: fault injection through an in-process toxiproxy (and a tiny fake
// RESP server) in front of a private redis-server, over-admission and
// memory checks under bounded load, property tests of the Go reference
// model, and least-privilege ACL checks. It has no non-test code: every
// claim is a test in this directory, reported in docs/reliability.md.
//
// Files (all tests): helpers_test.go (providers, policies, INFO figures
// through redistest and redisinfo), toxic_test.go, faults_test.go and
// pipeline_test.go (toxiproxy faults on single and batched calls),
// randomized_test.go (random fault runs), refusals_test.go and
// admission_test.go (what is refused before anything is sent),
// failover_test.go (loading, failover over-admission), partition_test.go
// (the partitions build tag: network namespaces), load_test.go (bounded
// load, over-admission, expiry), property_test.go (the Go model),
// dedup_test.go (the dedup retry at the defaults), fallback_test.go (the
// local fallback and its reconciliation), breaker_test.go and
// storm_test.go (an unreachable Redis), acl_test.go, tls_test.go and
// secrets_test.go (least privilege, TLS, no secret leaks).
// slicer_test.go registers the lane's own slicer toxic ("tlb_slicer"), whose
// sends can be interrupted: toxiproxy v2.5.0's slicer can deadlock removal
// (slicer_regression_test.go).
//
// The tests use only the public API of redisrate, programs, redistest and
// shared-contract. This package must never be imported, must never import
// rediscache's internals, an inbound adapter, app-bootstrap or fx, and must
// never talk to a Redis it did not start or to a non-loopback address.
package reliability
