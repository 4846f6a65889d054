package rls_test

import (
	"sync"
	"testing"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/tech-log/tech-log-backend/adapter-inbound-grpc/rls"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// TestDescriptorsAreAskedAtOnce: the descriptors of one request are asked
// together (one round trip through the provider), not one after another:
// each evaluation waits, bounded, until all three have arrived.
func TestDescriptorsAreAskedAtOnce(t *testing.T) {
	a, b, c := minuteRule("web", "a", 10), minuteRule("web", "b", 10), minuteRule("web", "c", 10)
	ports := newPorts()
	var arrived sync.WaitGroup
	arrived.Add(3)
	all := make(chan struct{})
	go func() { arrived.Wait(); close(all) }()
	ports.fail = func(req ratelimit.Request) ratelimit.Outcome {
		arrived.Done()
		select {
		case <-all:
			return nil // decide
		case <-time.After(5 * time.Second):
			return ratelimit.Unavailable{PolicyID: req.PolicyID, Category: ratelimit.CategoryDeadline}
		}
	}
	f := newFixture(t, oneRule("web", a, b, c), ports, rls.Options{})
	resp := f.must(t, request("web", desc("a", "x"), desc("b", "y"), desc("c", "z")))
	if resp.GetOverallCode() != pb.RateLimitResponse_OK {
		t.Fatalf("%v: the three descriptors were not asked at once", resp)
	}
	for _, k := range []string{"a", "b", "c"} {
		if got := ports.st.get(ratelimit.PolicyID("rls.web."+k), digest(map[string]string{"a": "x", "b": "y", "c": "z"}[k])); got != 1 {
			t.Fatalf("%s used = %d, want 1", k, got)
		}
	}
}
