package rls

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/tech-log/tech-log-backend/adapter-inbound-grpc/rlsconfig"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// The fixed parts of a policy built from a rule (see PolicyFor).
const (
	// PolicyRevision is the revision of every rule's policy, whatever its
	// limit: the revision is part of the state key, so a constant revision
	// keeps a subject's state across a limit change (ADR 0031).
	PolicyRevision = 1
	// RuleCleanupGrace is the grace added to a rule policy's state TTL.
	RuleCleanupGrace = time.Minute
	// RuleMaxClockRegression is how far server time may go back for a rule
	// policy.
	RuleMaxClockRegression = 2 * time.Second
	// readablePrefix and hashedPrefix separate the two forms of a derived
	// policy ID, so that no readable ID equals a hashed one.
	readablePrefix = "rls."
	hashedPrefix   = "rls-"
)

// Policy-building errors, wrapped by PolicyFor's and NewGeneration's.
var (
	// ErrUnknownPolicy: a rule names a policy the policy file lacks.
	ErrUnknownPolicy = errors.New("rule names a policy the policy file does not have")
	// ErrPolicyIDCollision: a derived policy ID is also a policy file's ID.
	ErrPolicyIDCollision = errors.New("derived policy id collides with a policy file policy")
	// ErrUnsupportedRule: a rule the service cannot enforce (a leaky
	// bucket, which needs the caller to hold the request; no limit).
	ErrUnsupportedRule = errors.New("unsupported rule")
)

// PolicyID derives the policy ID of the rule whose full key is fullKey
// (envoyproxy/ratelimit's: the domain, then every key_value of the rule's
// path, joined by '.', so it names the domain too): "rls." + fullKey when
// that is a valid PolicyID (lowercase letters, digits, '.', '_', '-', at
// most 64 characters), else "rls-" + 40 hex digits of SHA-256 over fullKey.
// It depends on nothing but its argument, so every instance and every
// generation derives the same ID, and the two prefixes keep a readable ID
// from ever equalling a hashed one.
func PolicyID(fullKey string) ratelimit.PolicyID {
	if id := ratelimit.PolicyID(readablePrefix + fullKey); id.Validate() == nil {
		return id
	}
	sum := sha256.Sum256([]byte(fullKey))
	return ratelimit.PolicyID(hashedPrefix + hex.EncodeToString(sum[:])[:40])
}

// PolicyFor builds the policy of rule rl: the policy file's policy when
// rl.Policy names one (looked up in ports), else a fail-closed policy under
// PolicyID(rl.FullKey), revision PolicyRevision,
// of rl's algorithm (a fixed window of RequestsPerUnit per Unit when
// rl.Algorithm is nil), MaxCost its limit. An unlimited rule has no
// policy (ok false).
func PolicyFor(rl *rlsconfig.RateLimit, ports Ports) (p ratelimit.Policy, ok bool, err error) {
	if rl == nil || rl.Unlimited {
		return ratelimit.Policy{}, false, nil
	}
	if rl.Policy != "" {
		id, err := ratelimit.ParsePolicyID(rl.Policy)
		if err != nil {
			return ratelimit.Policy{}, false, fmt.Errorf("rule %q policy: %w", rl.FullKey, err)
		}
		p, ok := ports.Policy(id)
		if !ok {
			return ratelimit.Policy{}, false, fmt.Errorf("rule %q policy %q: %w", rl.FullKey, id, ErrUnknownPolicy)
		}
		if alg, _ := p.Algorithm().Spec(); alg.Delays {
			return ratelimit.Policy{}, false, fmt.Errorf("rule %q policy %q: %w: a %s delays requests, which Envoy cannot do", rl.FullKey, id, ErrUnsupportedRule, alg.Name)
		}
		if p.Holds() {
			// Envoy's protocol has no release: a slot taken here would be
			// held until maxHold (ADR 0041).
			return ratelimit.Policy{}, false, fmt.Errorf("rule %q policy %q: %w: a concurrency limit needs its slot given back when the request ends, which Envoy's rate-limit protocol cannot say", rl.FullKey, id, ErrUnsupportedRule)
		}
		return p, true, nil
	}
	id := PolicyID(rl.FullKey)
	if _, clash := ports.Policy(id); clash {
		return ratelimit.Policy{}, false, fmt.Errorf("rule %q: %w: %q", rl.FullKey, ErrPolicyIDCollision, id)
	}
	spec, err := ruleSpec(rl)
	if err != nil {
		return ratelimit.Policy{}, false, fmt.Errorf("rule %q: %w", rl.FullKey, err)
	}
	spec.ID = id
	spec.Revision = PolicyRevision
	spec.CleanupGrace = RuleCleanupGrace
	spec.MaxClockRegression = RuleMaxClockRegression
	spec.FailurePolicy = ratelimit.FailClosed
	p, err = ratelimit.NewPolicy(spec)
	if err != nil {
		return ratelimit.Policy{}, false, fmt.Errorf("rule %q: %w", rl.FullKey, err)
	}
	return p, true, nil
}

// ruleSpec is the algorithm part of a rule's policy: Algorithm, Params and
// MaxCost (the limit).
func ruleSpec(rl *rlsconfig.RateLimit) (ratelimit.PolicySpec, error) {
	if rl.Algorithm != nil {
		return algorithmSpec(rl.Algorithm)
	}
	window := rl.Unit.Duration()
	limit := int64(rl.RequestsPerUnit)
	if window <= 0 || limit <= 0 {
		return ratelimit.PolicySpec{}, fmt.Errorf("%w: requests_per_unit %d per unit %v: no limit", ErrUnsupportedRule, rl.RequestsPerUnit, window)
	}
	return ratelimit.PolicySpec{Algorithm: ratelimit.AlgorithmFixedWindow, Params: ratelimit.FixedWindow{Limit: limit, Window: window}, MaxCost: limit}, nil
}
