package rls_test

import (
	"strings"
	"testing"

	"github.com/tech-log/tech-log-backend/adapter-inbound-grpc/rls"
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
