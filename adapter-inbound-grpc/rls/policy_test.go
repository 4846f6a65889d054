package rls_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tech-log/tech-log-backend/adapter-inbound-grpc/rls"
	"github.com/tech-log/tech-log-backend/adapter-inbound-grpc/rlsconfig"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

func TestPolicyIDIsValidAndDeterministic(t *testing.T) {
	for _, key := range []string{"web.user", "Web.User_Alice", "web.path_/api/v1", strings.Repeat("k", 200), "x"} {
		id := rls.PolicyID(key)
		if err := id.Validate(); err != nil {
			t.Errorf("PolicyID(%q) = %q: %v", key, id, err)
		}
		if id != rls.PolicyID(key) {
			t.Errorf("PolicyID(%q) not deterministic", key)
		}
	}
	if rls.PolicyID("web.user") != "rls.web.user" {
		t.Errorf("readable form: %q", rls.PolicyID("web.user"))
	}
	if a, b := rls.PolicyID("Web.user"), rls.PolicyID("web.User"); a == b || !strings.HasPrefix(string(a), "rls-") {
		t.Errorf("hashed forms %q %q", a, b)
	}
}

// onePolicy is a Ports with one policy-file policy; For is never called.
type onePolicy struct{ p ratelimit.Policy }

func (o onePolicy) Policy(id ratelimit.PolicyID) (ratelimit.Policy, bool) {
	return o.p, id == o.p.ID()
}
func (onePolicy) For([]ratelimit.Policy) (rls.Decider, error) { return nil, errors.New("not used") }

// TestPolicyForRefusesAConcurrencyLimit: a rule naming a concurrency
// policy is refused with the rule and the policy named (ADR 0041): Envoy's
// protocol cannot give a slot back, so it would be held until maxHold.
func TestPolicyForRefusesAConcurrencyLimit(t *testing.T) {
	p, err := ratelimit.NewPolicy(ratelimit.PolicySpec{ID: "inflight", Revision: 1, Algorithm: ratelimit.AlgorithmConcurrency,
		Params: ratelimit.Concurrency{Limit: 3, MaxHold: time.Second}, MaxCost: 1, CleanupGrace: time.Second, FailurePolicy: ratelimit.FailClosed})
	if err != nil {
		t.Fatal(err)
	}
	_, ok, err := rls.PolicyFor(&rlsconfig.RateLimit{FullKey: "api.user", Policy: "inflight"}, onePolicy{p})
	if ok || !errors.Is(err, rls.ErrUnsupportedRule) || !strings.Contains(err.Error(), `rule "api.user" policy "inflight"`) {
		t.Fatalf("PolicyFor = %v, %v; want ErrUnsupportedRule naming the rule and policy", ok, err)
	}
}
