package rls_test

import (
	"fmt"
	"testing"
	"time"

	commonpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/tech-log/tech-log-backend/adapter-inbound-grpc/rls"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// calls is what a fixture's last decision port was asked.
type calls struct{ evals, refunds, sets int }

func (f *fixture) calls() calls {
	d := f.ports.last()
	e, r := d.calls()
	return calls{evals: e, refunds: r, sets: d.setCalls()}
}

func statusCodes(resp *pb.RateLimitResponse) []pb.RateLimitResponse_Code {
	out := []pb.RateLimitResponse_Code{resp.GetOverallCode()}
	for _, st := range resp.GetStatuses() {
		out = append(out, st.GetCode())
	}
	return out
}

const (
	ok   = pb.RateLimitResponse_OK
	over = pb.RateLimitResponse_OVER_LIMIT
)

// threeRules is a domain of three minute rules: a (10), b (10), c (1).
func threeRules() []*rule {
	return []*rule{minuteRule("web", "a", 10), minuteRule("web", "b", 10), minuteRule("web", "c", 1)}
}

func threeDescs() []*commonpb.RateLimitDescriptor {
	return []*commonpb.RateLimitDescriptor{desc("a", "x"), withHits(desc("b", "y"), 3), desc("c", "z")}
}

// TestSeveralDescriptorsAreOneSetCall: the enforced descriptors of a
// request are decided by one EvaluateSet, each with its own subject and
// hits_addend, and none by Evaluate.
func TestSeveralDescriptorsAreOneSetCall(t *testing.T) {
	f := newFixture(t, oneRule("web", threeRules()...), newPorts(), rls.Options{})
	resp := f.must(t, request("web", threeDescs()...))
	if got := statusCodes(resp); fmt.Sprint(got) != fmt.Sprint([]pb.RateLimitResponse_Code{ok, ok, ok, ok}) {
		t.Fatalf("codes %v, want all OK", got)
	}
	if got := f.calls(); got != (calls{sets: 1}) {
		t.Fatalf("calls %+v, want one set call and nothing else", got)
	}
	for _, u := range []struct {
		id, subject string
		want        int64
	}{{"rls.web.a", "x", 1}, {"rls.web.b", "y", 3}, {"rls.web.c", "z", 1}} {
		if got := f.ports.st.get(ratelimit.PolicyID(u.id), digest(u.subject)); got != u.want {
			t.Errorf("%s used %d, want %d (its own subject and hits)", u.id, got, u.want)
		}
	}
	if got := resp.GetStatuses()[1].GetLimitRemaining(); got != 7 {
		t.Errorf("b's limit_remaining %d, want 7", got)
	}
}

// TestDeniedSetRefundsAndConsumesNothing: a request refused by one
// descriptor consumes nothing, refunds nothing (nothing was taken), and
// every descriptor reports its own code, the others' remaining as it
// stands.
func TestDeniedSetRefundsAndConsumesNothing(t *testing.T) {
	f := newFixture(t, oneRule("web", threeRules()...), newPorts(), rls.Options{})
	f.must(t, request("web", desc("c", "z")))
	before := f.calls()
	resp := f.must(t, request("web", threeDescs()...))
	if got := statusCodes(resp); fmt.Sprint(got) != fmt.Sprint([]pb.RateLimitResponse_Code{over, ok, ok, over}) {
		t.Fatalf("codes %v, want OVER_LIMIT with a and b OK and c OVER_LIMIT", got)
	}
	if got := f.calls(); got != (calls{evals: before.evals, sets: before.sets + 1}) {
		t.Fatalf("calls %+v after %+v, want one more set call, no evaluation, no refund", got, before)
	}
	if a, b := f.ports.st.get("rls.web.a", digest("x")), f.ports.st.get("rls.web.b", digest("y")); a != 0 || b != 0 {
		t.Fatalf("a used %d, b used %d, want 0 and 0", a, b)
	}
	if a, b := resp.GetStatuses()[0].GetLimitRemaining(), resp.GetStatuses()[1].GetLimitRemaining(); a != 10 || b != 10 {
		t.Fatalf("a remaining %d, b remaining %d, want 10 and 10 (as they stand)", a, b)
	}
	if v, _ := headerValue(resp, "Retry-After"); v != "30" {
		t.Fatalf("Retry-After %q, want 30", v)
	}
	if got := f.metrics.get("web|web.a|rolled_back"); got != 1 {
		t.Fatalf("a rolled_back %d, want 1", got)
	}
}

// TestFailedSetFailsClosed: a set that fails is the request's failure, on
// the member it names; nothing is taken or refunded.
func TestFailedSetFailsClosed(t *testing.T) {
	ports := newPorts()
	ports.fail = func(req ratelimit.Request) ratelimit.Outcome {
		if req.PolicyID == "rls.web.b" {
			return ratelimit.Unavailable{PolicyID: req.PolicyID, Category: ratelimit.CategoryConnection, RetryAfter: 2 * time.Second}
		}
		return nil
	}
	f := newFixture(t, oneRule("web", threeRules()...), ports, rls.Options{})
	resp := f.must(t, request("web", threeDescs()...))
	if resp.GetOverallCode() != over || resp.GetStatuses()[1].GetCode() != over {
		t.Fatalf("failed set: %v, want OVER_LIMIT on b", resp)
	}
	if v, _ := headerValue(resp, rls.UndecidedHeader); v != "unavailable; category=connection" {
		t.Fatalf("%s = %q", rls.UndecidedHeader, v)
	}
	if got := f.calls(); got != (calls{sets: 1}) {
		t.Fatalf("calls %+v, want one set call", got)
	}
	if got := f.ports.st.get("rls.web.a", digest("x")); got != 0 {
		t.Fatalf("a used %d, want 0", got)
	}
}

// TestWhatCannotJoinASetIsChargedInOrder: the same limit and subject
// twice (a charge and a check), more than MaxSetMembers descriptors, or
// one enforced descriptor go the ordered path; a shadow descriptor is
// never a member, asked on its own after the set.
func TestWhatCannotJoinASetIsChargedInOrder(t *testing.T) {
	t.Run("same limit and subject twice", func(t *testing.T) {
		f := newFixture(t, oneRule("web", minuteRule("web", "a", 10)), newPorts(), rls.Options{})
		f.must(t, request("web", desc("a", "x"), withHits(desc("a", "x"), 0)))
		if got := f.calls(); got != (calls{evals: 2, refunds: 1}) {
			t.Fatalf("calls %+v, want 2 evaluations (and the check's refund), no set", got)
		}
	})
	t.Run("same limit, other subjects", func(t *testing.T) {
		f := newFixture(t, oneRule("web", minuteRule("web", "a", 10)), newPorts(), rls.Options{})
		f.must(t, request("web", desc("a", "x"), desc("a", "y")))
		if got := f.calls(); got != (calls{sets: 1}) {
			t.Fatalf("calls %+v, want one set call", got)
		}
	})
	t.Run("more than MaxSetMembers", func(t *testing.T) {
		var rs []*rule
		var ds []*commonpb.RateLimitDescriptor
		for i := range ratelimit.MaxSetMembers + 1 {
			k := fmt.Sprintf("k%d", i)
			rs, ds = append(rs, minuteRule("web", k, 10)), append(ds, desc(k, "v"))
		}
		f := newFixture(t, oneRule("web", rs...), newPorts(), rls.Options{})
		f.must(t, request("web", ds...))
		if got := f.calls(); got != (calls{evals: ratelimit.MaxSetMembers + 1}) {
			t.Fatalf("calls %+v, want %d evaluations, no set", got, ratelimit.MaxSetMembers+1)
		}
	})
	t.Run("a shadow descriptor stays out", func(t *testing.T) {
		shadow := minuteRule("web", "s", 10)
		shadow.shadow = true
		f := newFixture(t, oneRule("web", minuteRule("web", "a", 10), minuteRule("web", "b", 10), shadow), newPorts(), rls.Options{})
		f.must(t, request("web", desc("a", "x"), desc("s", "x"), desc("b", "x")))
		if got := f.calls(); got != (calls{evals: 1, sets: 1}) {
			t.Fatalf("calls %+v, want one set call and the shadow's evaluation", got)
		}
		f.must(t, request("web", desc("a", "x"), desc("s", "x")))
		if got := f.calls(); got != (calls{evals: 3, sets: 1}) {
			t.Fatalf("calls %+v, want one enforced and one shadow descriptor evaluated on their own", got)
		}
	})
}
