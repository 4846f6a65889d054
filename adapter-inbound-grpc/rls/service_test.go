package rls_test

import (
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	commonpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tech-log/tech-log-backend/adapter-inbound-grpc/rls"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

func TestAdmitsTheLimitThenOverLimit(t *testing.T) {
	rl := minuteRule("web", "user", 3)
	f := newFixture(t, oneRule("web", rl), newPorts(), rls.Options{})
	var ok, over int
	for range 5 {
		resp := f.must(t, request("web", desc("user", "alice")))
		st := resp.GetStatuses()[0]
		if st.GetCurrentLimit().GetRequestsPerUnit() != 3 || st.GetCurrentLimit().GetUnit() != pb.RateLimitResponse_RateLimit_MINUTE {
			t.Fatalf("current_limit = %v, want 3 per MINUTE", st.GetCurrentLimit())
		}
		if st.GetDurationUntilReset() == nil {
			t.Fatal("no duration_until_reset")
		}
		switch resp.GetOverallCode() {
		case pb.RateLimitResponse_OK:
			ok++
			if want := uint32(3 - ok); st.GetLimitRemaining() != want {
				t.Fatalf("limit_remaining = %d, want %d", st.GetLimitRemaining(), want)
			}
			if _, has := headerValue(resp, "Retry-After"); has {
				t.Fatal("Retry-After on OK")
			}
		case pb.RateLimitResponse_OVER_LIMIT:
			over++
			if v, has := headerValue(resp, "Retry-After"); !has || v != "30" {
				t.Fatalf("Retry-After = %q, %v; want 30", v, has)
			}
		}
		if v, _ := headerValue(resp, "RateLimit-Policy"); v != `"rls.web.user";q=3;w=60` {
			t.Fatalf("RateLimit-Policy = %q", v)
		}
	}
	if ok != 3 || over != 2 {
		t.Fatalf("ok %d over %d, want 3 and 2", ok, over)
	}
	if got := f.ports.st.get("rls.web.user", digest("alice")); got != 3 {
		t.Fatalf("used = %d, want 3", got)
	}
}

func TestDeniedRequestConsumesNothingFromAnyDescriptor(t *testing.T) {
	wide, narrow := minuteRule("web", "path", 10), minuteRule("web", "user", 1)
	f := newFixture(t, oneRule("web", wide, narrow), newPorts(), rls.Options{})
	for i, want := range []pb.RateLimitResponse_Code{pb.RateLimitResponse_OK, pb.RateLimitResponse_OVER_LIMIT, pb.RateLimitResponse_OVER_LIMIT} {
		resp := f.must(t, request("web", desc("path", "/login"), desc("user", "alice")))
		if resp.GetOverallCode() != want {
			t.Fatalf("request %d: %v, want %v", i, resp.GetOverallCode(), want)
		}
	}
	// Only the admitted request is charged on the wide rule.
	if got := f.ports.st.get("rls.web.path", digest("/login")); got != 1 {
		t.Fatalf("path used = %d, want 1 (the denied requests took nothing)", got)
	}
	// Denied first: the set takes nothing of the wide one.
	f.must(t, request("web", desc("user", "alice"), desc("path", "/login")))
	if got := f.ports.st.get("rls.web.path", digest("/login")); got != 1 {
		t.Fatalf("path used = %d, want 1", got)
	}
	if got := f.metrics.get("web|web.path|rolled_back"); got < 2 {
		t.Fatalf("rolled_back counted %d times, want >= 2", got)
	}
}

func TestHitsAddend(t *testing.T) {
	rl := minuteRule("web", "user", 10)
	f := newFixture(t, oneRule("web", rl), newPorts(), rls.Options{})
	req := request("web", desc("user", "alice"))
	req.HitsAddend = 4
	f.must(t, req)
	if got := f.ports.st.get("rls.web.user", digest("alice")); got != 4 {
		t.Fatalf("used = %d, want 4", got)
	}
	// The descriptor's hits_addend wins over the request's.
	req = request("web", withHits(desc("user", "alice"), 2))
	req.HitsAddend = 9
	f.must(t, req)
	if got := f.ports.st.get("rls.web.user", digest("alice")); got != 6 {
		t.Fatalf("used = %d, want 6", got)
	}
	// More than the limit is never admitted and takes nothing.
	resp := f.must(t, request("web", withHits(desc("user", "alice"), 11)))
	if resp.GetOverallCode() != pb.RateLimitResponse_OVER_LIMIT {
		t.Fatalf("hits 11 of 10: %v", resp.GetOverallCode())
	}
	if got := f.ports.st.get("rls.web.user", digest("alice")); got != 6 {
		t.Fatalf("used = %d, want 6", got)
	}
}

func TestCheckOnlyConsumesNothing(t *testing.T) {
	rl := minuteRule("web", "user", 2)
	f := newFixture(t, oneRule("web", rl), newPorts(), rls.Options{})
	for range 3 {
		resp := f.must(t, request("web", withHits(desc("user", "alice"), 0)))
		if resp.GetOverallCode() != pb.RateLimitResponse_OK || resp.GetStatuses()[0].GetLimitRemaining() != 2 {
			t.Fatalf("check: %v remaining %d, want OK 2", resp.GetOverallCode(), resp.GetStatuses()[0].GetLimitRemaining())
		}
	}
	if got := f.ports.st.get("rls.web.user", digest("alice")); got != 0 {
		t.Fatalf("used = %d after checks, want 0", got)
	}
	f.must(t, request("web", desc("user", "alice")))
	f.must(t, request("web", desc("user", "alice")))
	resp := f.must(t, request("web", withHits(desc("user", "alice"), 0)))
	if resp.GetOverallCode() != pb.RateLimitResponse_OVER_LIMIT {
		t.Fatalf("check on an empty budget: %v, want OVER_LIMIT", resp.GetOverallCode())
	}
}

func TestNegativeHits(t *testing.T) {
	rl := minuteRule("web", "user", 3)
	neg := withHits(desc("user", "bob"), 1_000)
	neg.IsNegativeHits = true

	off := newFixture(t, oneRule("web", rl), newPorts(), rls.Options{})
	if _, err := off.call(t, request("web", neg)); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("negative hits while disabled: %v, want InvalidArgument", err)
	}

	f := newFixture(t, oneRule("web", rl), newPorts(), rls.Options{NegativeHits: true})
	// A refill of a budget nobody used gives nothing: never above the limit.
	f.must(t, request("web", neg))
	admitted := 0
	for range 6 {
		if f.must(t, request("web", desc("user", "bob"))).GetOverallCode() == pb.RateLimitResponse_OK {
			admitted++
		}
	}
	if admitted != 3 {
		t.Fatalf("admitted %d after a refill of an unused budget, want 3 (the limit)", admitted)
	}
	// A huge refill brings it back to full, not beyond.
	resp := f.must(t, request("web", neg))
	if r := resp.GetStatuses()[0].GetLimitRemaining(); r != 3 {
		t.Fatalf("remaining after refill = %d, want 3", r)
	}
	if got := f.ports.st.get("rls.web.user", digest("bob")); got != 0 {
		t.Fatalf("used = %d, want 0 (never below zero)", got)
	}
	// A refill riding on a denied request changes nothing.
	for range 3 {
		f.must(t, request("web", desc("user", "bob")))
	}
	resp = f.must(t, request("web", desc("user", "bob"), neg))
	if resp.GetOverallCode() != pb.RateLimitResponse_OVER_LIMIT {
		t.Fatalf("exhausted bob with a refill: %v, want OVER_LIMIT", resp.GetOverallCode())
	}
	if got := f.ports.st.get("rls.web.user", digest("bob")); got != 3 {
		t.Fatalf("used = %d, want 3 (a denied request gives nothing back)", got)
	}
}

func TestUndecidedFailsClosedAndRefunds(t *testing.T) {
	ok, broken := minuteRule("web", "path", 10), minuteRule("web", "user", 10)
	for _, mode := range []rls.Undecided{rls.UndecidedFailClosed, rls.UndecidedError} {
		t.Run(mode.String(), func(t *testing.T) {
			ports := newPorts()
			ports.fail = func(req ratelimit.Request) ratelimit.Outcome {
				if req.PolicyID == "rls.web.user" {
					return ratelimit.Indeterminate{PolicyID: req.PolicyID, Category: ratelimit.CategoryTimeout}
				}
				return nil
			}
			f := newFixture(t, oneRule("web", ok, broken), ports, rls.Options{Undecided: mode})
			resp, err := f.call(t, request("web", desc("path", "/x"), desc("user", "alice")))
			switch mode {
			case rls.UndecidedFailClosed:
				if err != nil {
					t.Fatal(err)
				}
				if resp.GetOverallCode() != pb.RateLimitResponse_OVER_LIMIT || resp.GetStatuses()[1].GetCode() != pb.RateLimitResponse_OVER_LIMIT {
					t.Fatalf("undecided: %v", resp)
				}
				if v, _ := headerValue(resp, rls.UndecidedHeader); v != "indeterminate; category=timeout" {
					t.Fatalf("%s = %q", rls.UndecidedHeader, v)
				}
			case rls.UndecidedError:
				if status.Code(err) != codes.Unavailable {
					t.Fatalf("undecided in error mode: %v, want Unavailable", err)
				}
			}
			if got := ports.st.get("rls.web.path", digest("/x")); got != 0 {
				t.Fatalf("path used = %d, want 0 (refunded)", got)
			}
		})
	}
}

func TestShadowMode(t *testing.T) {
	shadow := minuteRule("web", "user", 1)
	shadow.shadow = true
	f := newFixture(t, oneRule("web", shadow), newPorts(), rls.Options{})
	for range 4 {
		if resp := f.must(t, request("web", desc("user", "alice"))); resp.GetOverallCode() != pb.RateLimitResponse_OK {
			t.Fatalf("shadow rule answered %v", resp.GetOverallCode())
		}
	}
	if got := f.metrics.get("web|web.user|would_deny"); got != 3 {
		t.Fatalf("would_deny = %d, want 3", got)
	}
	if got := f.ports.st.get("rls.web.user", digest("alice")); got != 1 {
		t.Fatalf("used = %d, want 1 (a would-be denial consumes nothing)", got)
	}

	global := newFixture(t, oneRule("web", minuteRule("web", "user", 1)), newPorts(), rls.Options{ShadowMode: true})
	for range 3 {
		if resp := global.must(t, request("web", desc("user", "alice"))); resp.GetOverallCode() != pb.RateLimitResponse_OK {
			t.Fatalf("global shadow answered %v", resp.GetOverallCode())
		}
	}
	if got := global.metrics.get("web|web.user|would_deny"); got != 2 {
		t.Fatalf("would_deny = %d, want 2", got)
	}
}

func TestUnknownDomainAndNoRule(t *testing.T) {
	f := newFixture(t, oneRule("web", minuteRule("web", "user", 1)), newPorts(), rls.Options{})
	if _, err := f.call(t, request("other", desc("user", "alice"))); status.Code(err) != codes.NotFound {
		t.Fatalf("unknown domain: %v, want NotFound", err)
	}
	resp := f.must(t, request("web", desc("nothing", "here")))
	if resp.GetOverallCode() != pb.RateLimitResponse_OK || resp.GetStatuses()[0].GetCurrentLimit() != nil {
		t.Fatalf("no rule: %v", resp)
	}
	if e, _ := f.ports.last().calls(); e != 0 {
		t.Fatalf("%d evaluations for no rule", e)
	}
}

func TestBoundsRefuseBeforeDeciding(t *testing.T) {
	f := newFixture(t, oneRule("web", minuteRule("web", "user", 100)), newPorts(), rls.Options{})
	b := rls.DefaultBounds
	many := request("web")
	for i := 0; i <= b.MaxDescriptors; i++ {
		many.Descriptors = append(many.Descriptors, desc("user", strings.Repeat("u", i+1)))
	}
	deep := desc()
	for i := 0; i <= b.MaxEntries; i++ {
		deep.Entries = append(deep.Entries, desc("user", "x").Entries[0])
	}
	overflow := request("web", desc("user", "alice"))
	overflow.HitsAddend = ^uint32(0)
	cases := map[string]*pb.RateLimitRequest{
		"empty domain":       request("", desc("user", "alice")),
		"long domain":        request(strings.Repeat("d", b.MaxKeyLen+1), desc("user", "alice")),
		"no descriptors":     request("web"),
		"too many":           many,
		"no entries":         request("web", desc()),
		"too many entries":   request("web", deep),
		"empty key":          request("web", desc("", "alice")),
		"long key":           request("web", desc(strings.Repeat("k", b.MaxKeyLen+1), "alice")),
		"long value":         request("web", desc("user", strings.Repeat("v", b.MaxValueLen+1))),
		"hits overflow":      overflow,
		"desc hits overflow": request("web", withHits(desc("user", "alice"), ^uint64(0))),
		"duplicate":          request("web", desc("user", "alice"), desc("user", "alice")),
	}
	for name, req := range cases {
		if _, err := f.call(t, req); status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: %v, want InvalidArgument", name, err)
		}
	}
	if e, _ := f.ports.last().calls(); e != 0 {
		t.Fatalf("%d evaluations for refused requests, want 0", e)
	}
}

func TestSubjectIsPseudonymizedValue(t *testing.T) {
	f := newFixture(t, oneRule("web", minuteRule("web", "user", 5)), newPorts(), rls.Options{})
	f.must(t, request("web", desc("user", "alice")))
	// Not a principal the HTTP edge could have: hashed, never passed raw.
	f.must(t, request("web", desc("user", "al\tice")))
	// More entries than the configured path: no limit (the reference's).
	f.must(t, request("web", desc("user", "alice", "path", "/x")))
	f.pseud.mu.Lock()
	seen := append([]string(nil), f.pseud.seen...)
	f.pseud.mu.Unlock()
	if len(seen) != 2 || seen[0] != "alice" || !strings.HasPrefix(seen[1], "rls:") || strings.Contains(seen[1], "ice") {
		t.Fatalf("subjects = %q: want alice, then a hashed subject", seen)
	}
	if got := f.ports.st.get("rls.web.user", digest("alice")); got != 1 {
		t.Fatalf("state under the digest of alice = %d, want 1", got)
	}
}

func TestDetailedMetricIsCapped(t *testing.T) {
	rl := minuteRule("web", "user", 100)
	rl.detailed = true
	f := newFixture(t, oneRule("web", rl), newPorts(), rls.Options{DetailedMetricCap: 2})
	for _, u := range []string{"a", "b", "c", "d", "a"} {
		f.must(t, request("web", desc("user", u)))
	}
	if f.metrics.get("web|web.user_a|ok") != 2 || f.metrics.get("web|web.user_b|ok") != 1 {
		t.Fatalf("detailed keys: %v", f.metrics.decisions)
	}
	if f.metrics.get("web|web.user|ok") != 2 || f.metrics.folded != 2 {
		t.Fatalf("folded: %v, folded %d", f.metrics.decisions, f.metrics.folded)
	}
	plain := newFixture(t, oneRule("web", minuteRule("web", "user", 100)), newPorts(), rls.Options{})
	plain.must(t, request("web", desc("user", "secret-value")))
	for k := range plain.metrics.decisions {
		if strings.Contains(k, "secret-value") {
			t.Fatalf("a descriptor value in a label: %q", k)
		}
	}
}

func TestConcurrentClientsNeverExceedTheLimit(t *testing.T) {
	f := newFixture(t, oneRule("web", minuteRule("web", "user", 7), minuteRule("web", "path", 1000)), newPorts(), rls.Options{})
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 10 {
				resp, err := f.call(t, request("web", desc("path", "/p"), desc("user", "alice")))
				if err == nil && resp.GetOverallCode() == pb.RateLimitResponse_OK {
					admitted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if admitted.Load() != 7 {
		t.Fatalf("admitted %d, want exactly the limit 7", admitted.Load())
	}
	if got := f.ports.st.get("rls.web.path", digest("/p")); got != 7 {
		t.Fatalf("path used = %d, want 7 (only admitted requests)", got)
	}
}

func TestPolicyFromThePolicyFile(t *testing.T) {
	login, err := ratelimit.NewPolicy(ratelimit.PolicySpec{ID: "login", Revision: 3, Algorithm: ratelimit.AlgorithmFixedWindow,
		Params: ratelimit.FixedWindow{Limit: 2, Window: 60_000_000_000}, MaxCost: 1, CleanupGrace: 60_000_000_000, FailurePolicy: ratelimit.FailClosed})
	if err != nil {
		t.Fatal(err)
	}
	rl := &rule{key: "user", policy: "login"}
	f := newFixture(t, oneRule("web", rl), newPorts(login), rls.Options{})
	for range 3 {
		f.must(t, request("web", desc("user", "alice")))
	}
	if got := f.ports.st.get("login", digest("alice")); got != 2 {
		t.Fatalf("login used = %d, want 2", got)
	}
	// An unknown policy is a load error; the previous generation serves on.
	bad := oneRule("web", &rule{key: "user", policy: "nope"})
	if err := f.svc.Load(bad); err == nil {
		t.Fatal("Load with an unknown policy succeeded")
	}
	if resp := f.must(t, request("web", desc("user", "bob"))); resp.GetOverallCode() != pb.RateLimitResponse_OK {
		t.Fatalf("after a failed load: %v", resp.GetOverallCode())
	}
}

// TestDescriptorLimitOverrideIsIgnored (issue 36: no client-controlled
// input changes a limit): a descriptor's limit override, which Envoy
// fills from request data, never raises the configured limit; the status
// reports the configured one.
func TestDescriptorLimitOverrideIsIgnored(t *testing.T) {
	rl := minuteRule("web", "user", 2)
	f := newFixture(t, oneRule("web", rl), newPorts(), rls.Options{})
	var ok int
	for range 4 {
		d := desc("user", "alice")
		d.Limit = &commonpb.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1000, Unit: typev3.RateLimitUnit_SECOND}
		resp := f.must(t, request("web", d))
		if resp.GetOverallCode() == pb.RateLimitResponse_OK {
			ok++
		}
		if got := resp.GetStatuses()[0].GetCurrentLimit().GetRequestsPerUnit(); got != 2 {
			t.Fatalf("current_limit %d, want the configured 2", got)
		}
	}
	if ok != 2 {
		t.Fatalf("admitted %d with a limit override of 1000/s, want the configured 2", ok)
	}
}
