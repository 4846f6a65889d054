// Package rls serves Envoy's rate-limit protocol
// (envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit) over the
// project's port: Service decides, NewGRPCServer puts it and the gRPC
// health service on one listener (TLS, mutual TLS, a receive bound), and
// JSONHandler is envoyproxy/ratelimit's POST /json and GET /healthcheck.
//
// It owns how a descriptor becomes a decision: the rule (rlsconfig) a
// descriptor matches becomes a ratelimit.Policy (PolicyFor: a fixed window
// of requests_per_unit per unit, the named algorithm, or the policy file's
// policy named by `policy:`) under an ID derived from the rule's full key
// alone (PolicyID) at a constant revision, so that every instance agrees
// on it and a changed limit keeps the subject's state (ADR 0031); the
// descriptor's values are its subject, pseudonymized through the injected
// Pseudonymizer (the HTTP edge's principal digest, so `user=alice` and the
// trusted-header principal alice are one subject); and every descriptor of
// a request is decided all or nothing: in one policy-set call when its
// descriptors can form a set (setMembers), else in order, refunding the
// admissions of a request that another descriptor refuses.
//
// Why Ports is an interface with For: the Redis provider takes its
// policies at construction and has no way to add one, so each
// configuration generation needs its own Decider, built by the
// composition root (the only place that may see Redis) and closed by the
// Service after the generation's last request. Two methods are all the
// Service needs: the policy file's policies by ID and a Decider for a
// policy list. Pseudonymizer and Metrics are one-purpose interfaces for
// the same reason: the secret and the metrics registry stay in the
// composition root.
//
// It imports the standard library, shared-contract, grpc, protobuf, the
// Envoy API types and this module's rlsconfig. It must never import
// go-redis, fx, a metrics library, another adapter (adapter-inbound-web,
// adapter-outbound-cache-redis) or app-bootstrap.
package rls
