package wiring

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/tech-log/tech-log-backend/adapter-inbound-grpc/dirwatch"
	"github.com/tech-log/tech-log-backend/app-bootstrap/config"
)

// reload reads the policy file and applies it, or refuses it, or finds it
// unchanged (Policies). It logs and counts every attempt.
func (p *Policies) reload(trigger dirwatch.Trigger) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return fmt.Errorf("%w: the service is stopping", ErrPolicyReloadRefused)
	}
	old := p.current()
	path := old.cfg.RateLimit.PoliciesSource
	if !policyFile(old.cfg) {
		p.log.Info("policy reload: nothing to reload", "var", envPoliciesFile, "trigger", trigger.String())
		return config.ErrNoPolicyFile
	}
	result, err := p.apply(old, path)
	p.stats.Reload(trigger.String(), result)
	switch result {
	case reloadRefused:
		err = fmt.Errorf("%s reload of %s (%s): %w: %w", trigger, path, envPoliciesFile, ErrPolicyReloadRefused, err)
		p.log.Error("policy reload refused; the previous policies keep serving", "var", envPoliciesFile, "file", path, "trigger", trigger.String(), "err", err)
		return err
	case reloadUnchanged:
		p.log.Info("policy reload: unchanged", "var", envPoliciesFile, "file", path, "trigger", trigger.String())
	default:
		p.log.Info("policies reloaded", "var", envPoliciesFile, "file", path, "trigger", trigger.String(),
			"policies", p.current().cfg.RateLimit.Policies.IDs())
	}
	return nil
}

// apply does the work of reload under p.mu: the result label, and the
// reason when refused.
func (p *Policies) apply(old *policyGen, path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return reloadRefused, fmt.Errorf("%s: %s: %w", envPoliciesFile, path, err)
	}
	digest := sha256.Sum256(data)
	if digest == p.digest {
		return reloadUnchanged, nil
	}
	next, err := config.ReloadPolicies(old.cfg)
	if err != nil {
		return reloadRefused, err
	}
	set := next.RateLimit.Policies
	if err := checkRevisions(old.cfg.RateLimit.Policies, set); err != nil {
		return reloadRefused, err // reload names the file and the variable
	}
	if sameServing(old.cfg, next) {
		p.digest = digest
		return reloadUnchanged, nil
	}
	var errs []error
	for _, f := range p.followers {
		if f.Check != nil {
			if err := f.Check(set); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", f.Name, err))
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return reloadRefused, err
	}
	g, err := newPolicyGen(next, old.cfg.RateLimit.Policies.Policies, p.log, p.m)
	if err != nil {
		return reloadRefused, err
	}
	if p.build != nil {
		if g.handler, err = p.build(next, g.edge); err != nil {
			_ = g.close()
			return reloadRefused, err
		}
	}
	// Bounded as start-up is: the program checks, then the denial cache's
	// subscription. An unreachable server is not a refusal (the new
	// generation fails closed until it answers, as at start).
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout(next))
	err = g.start(ctx)
	cancel()
	if err != nil {
		_ = g.close()
		return reloadRefused, err
	}
	p.cur.Store(g)
	p.digest = digest
	p.stats.Loaded(revisions(set), time.Now())
	p.retiring.Add(1)
	go func() {
		defer p.retiring.Done()
		// Requests that started on old finish on it; then it closes.
		if err := old.retire(p.drain); err != nil {
			p.log.Warn("policy reload: closing the previous generation", "err", err)
		}
	}()
	for _, f := range p.followers {
		if f.Follow != nil {
			f.Follow(set)
		}
	}
	return reloadApplied, nil
}
