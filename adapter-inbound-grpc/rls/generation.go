package rls

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/tech-log/tech-log-backend/adapter-inbound-grpc/rlsconfig"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// ErrNoRules: Load was given no configuration.
var ErrNoRules = errors.New("no rate-limit configuration")

// generation is one configuration and the decision port built for it.
// Requests hold its read lock while they use it; retire takes the write
// lock, so Close runs after the last of them.
type generation struct {
	rules    Rules
	policies map[*rlsconfig.RateLimit]ratelimit.Policy
	decider  Decider

	mu      sync.RWMutex
	retired bool
}

// newGeneration builds every rule's policy and the Decider over them.
func newGeneration(rules Rules, ports Ports) (*generation, error) {
	if rules == nil {
		return nil, ErrNoRules
	}
	g := &generation{rules: rules, policies: make(map[*rlsconfig.RateLimit]ratelimit.Policy)}
	byID := make(map[ratelimit.PolicyID]ratelimit.Policy)
	var errs []error
	for _, rl := range rules.Limits() {
		p, ok, err := PolicyFor(rl, ports)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !ok {
			continue
		}
		if prev, seen := byID[p.ID()]; seen && prev != p {
			// Two full keys hashing alike, or a rule and a policy file
			// policy under one ID with different parameters.
			errs = append(errs, fmt.Errorf("rule %q: %w: %q", rl.FullKey, ErrPolicyIDCollision, p.ID()))
			continue
		}
		byID[p.ID()] = p
		g.policies[rl] = p
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if len(byID) == 0 {
		// Nothing to decide (only unlimited rules): no provider needed.
		g.decider = noDecider{}
		return g, nil
	}
	list := make([]ratelimit.Policy, 0, len(byID))
	for _, p := range byID {
		list = append(list, p)
	}
	d, err := ports.For(list)
	if err != nil {
		return nil, fmt.Errorf("decision port: %w", err)
	}
	if d == nil {
		return nil, errors.New("decision port: Ports.For returned nil")
	}
	g.decider = d
	return g, nil
}

// acquire read-locks g unless it has been retired; release with
// g.mu.RUnlock.
func (g *generation) acquire() bool {
	g.mu.RLock()
	if g.retired {
		g.mu.RUnlock()
		return false
	}
	return true
}

// retire waits for the requests using g and closes its Decider.
func (g *generation) retire() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.retired {
		return nil
	}
	g.retired = true
	return g.decider.Close()
}

// noDecider is the Decider of a generation without a limited rule: no
// rule has a policy, so it is never asked; if it were, it would decide
// nothing (fail closed).
type noDecider struct{}

var _ Decider = noDecider{}

func (noDecider) Evaluate(context.Context, ratelimit.Request) ratelimit.Outcome {
	return ratelimit.Unavailable{Category: ratelimit.CategoryUnknownPolicy}
}

func (noDecider) EvaluateSet(context.Context, ratelimit.SetRequest) ratelimit.Outcome {
	return ratelimit.Unavailable{Category: ratelimit.CategoryUnknownPolicy}
}

func (noDecider) Refund(context.Context, ratelimit.Request, ratelimit.Receipt) ratelimit.Outcome {
	return ratelimit.Unavailable{Category: ratelimit.CategoryUnknownPolicy}
}

func (noDecider) Close() error { return nil }
