package rls_test

import (
	"strings"
	"testing"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/tech-log/tech-log-backend/adapter-inbound-grpc/rls"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// TestShadowPolicyIsAShadowRule: a rule whose rate_limit names a policy
// file policy with "enforce": "shadow" is a shadow rule, exactly as
// shadow_mode: true makes one (ADR 0037): decided and counted
// (would_deny), answered OK, a would-be denial consuming nothing, and
// beside an enforced descriptor it neither refuses the request nor gives
// the RateLimit fields.
func TestShadowPolicyIsAShadowRule(t *testing.T) {
	policy := func(id ratelimit.PolicyID, limit int64, e ratelimit.Enforcement) ratelimit.Policy {
		p, err := ratelimit.NewPolicy(ratelimit.PolicySpec{ID: id, Revision: 1, Algorithm: ratelimit.AlgorithmFixedWindow,
			Params: ratelimit.FixedWindow{Limit: limit, Window: time.Minute}, MaxCost: 1, CleanupGrace: time.Minute,
			FailurePolicy: ratelimit.FailClosed, Enforcement: e})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	dark, enforced := policy("dark", 1, ratelimit.Shadow), policy("enforced", 3, ratelimit.Enforce)

	alone := newFixture(t, oneRule("web", &rule{key: "user", policy: "dark"}), newPorts(dark), rls.Options{})
	for i := range 4 {
		if resp := alone.must(t, request("web", desc("user", "alice"))); resp.GetOverallCode() != pb.RateLimitResponse_OK {
			t.Fatalf("request %d: a shadow policy's rule answered %v", i+1, resp.GetOverallCode())
		}
	}
	if got := alone.metrics.get("web|web.user|would_deny"); got != 3 {
		t.Fatalf("would_deny = %d, want 3", got)
	}
	if got := alone.ports.st.get("dark", digest("alice")); got != 1 {
		t.Fatalf("used = %d, want 1 (a would-be denial consumes nothing)", got)
	}

	// Beside an enforced rule: the enforced rule decides alone.
	both := newFixture(t, oneRule("web", &rule{key: "user", policy: "enforced"}, &rule{key: "plan", policy: "dark"}), newPorts(dark, enforced), rls.Options{})
	codes := make([]pb.RateLimitResponse_Code, 0, 4)
	for range 4 {
		resp := both.must(t, request("web", desc("user", "alice"), desc("plan", "alice")))
		codes = append(codes, resp.GetOverallCode())
		if v, ok := headerValue(resp, "RateLimit"); ok && strings.HasPrefix(v, `"dark"`) {
			t.Fatalf("RateLimit names the shadow policy: %s", v)
		}
	}
	ok, over := pb.RateLimitResponse_OK, pb.RateLimitResponse_OVER_LIMIT
	if want := []pb.RateLimitResponse_Code{ok, ok, ok, over}; !equalCodes(codes, want) {
		t.Fatalf("codes %v, want %v: the enforced limit of 3 decides, the shadow limit of 1 never", codes, want)
	}
	if got := both.metrics.get("web|web.plan|would_deny"); got != 2 {
		t.Fatalf("would_deny = %d, want 2 (requests 2 and 3; the 4th is refused before it is asked)", got)
	}
}

func equalCodes(a, b []pb.RateLimitResponse_Code) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
