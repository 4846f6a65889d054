package wiring

import (
	"errors"
	"fmt"

	"github.com/tech-log/tech-log-backend/adapter-inbound-grpc/rls"
	"github.com/tech-log/tech-log-backend/app-bootstrap/config"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// checkPolicies is the RLS's PolicyFollower.Check: every rule of the
// serving rule set must still build its policy from set (a rule's
// `rate_limit: {policy: X}` names a policy the file defines, one that does
// not delay; a rule's own ID does not clash with one of set's). Before
// start there are no rules yet, and nothing to check.
func (s *RLSServer) checkPolicies(set config.PolicySet) error {
	w := s.watcher()
	if w == nil {
		return nil
	}
	view := policyView{set}
	var errs []error
	for _, rl := range w.Config().Limits() {
		if _, _, err := rls.PolicyFor(rl, view); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("the rules in %s do not serve with these policies: %w", s.cfg.RLS.ConfigDir, err)
	}
	return nil
}

// followPolicies is the RLS's PolicyFollower.Follow: the rule directory
// is loaded again, so its next generation (a new provider, an empty
// denial cache) serves the reloaded policies; the previous generation
// closes after its requests. It is counted and logged as a reload of the
// rules (trigger "call").
func (s *RLSServer) followPolicies(config.PolicySet) {
	w := s.watcher()
	if w == nil {
		// Not started: start loads the rules with the policies serving
		// then.
		return
	}
	if err := w.Reload(); err != nil {
		s.log.Error("rls: the rules did not follow the policy reload; the previous rule generation keeps serving the previous policies", "var", envRLSDir, "err", err)
	}
}

// policyView is rls.Ports over a policy set being checked: Policy only.
type policyView struct{ set config.PolicySet }

var _ rls.Ports = policyView{}

// Policy implements rls.Ports.
func (v policyView) Policy(id ratelimit.PolicyID) (ratelimit.Policy, bool) { return v.set.Policy(id) }

// For implements rls.Ports; a view builds nothing.
func (policyView) For([]ratelimit.Policy) (rls.Decider, error) {
	return nil, errors.New("rls: a policy view builds no decision port")
}
