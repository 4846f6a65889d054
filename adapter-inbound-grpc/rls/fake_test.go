package rls_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	commonpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/tech-log/tech-log-backend/adapter-inbound-grpc/rls"
	"github.com/tech-log/tech-log-backend/adapter-inbound-grpc/rlsconfig"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit/ratelimittest"
)

// store is the fake coordination state: units used per policy and
// subject, never refilled (windows in the tests are long).
type store struct {
	mu   sync.Mutex
	used map[string]int64
}

func (s *store) get(id ratelimit.PolicyID, d ratelimit.SubjectDigest) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.used[string(id)+"/"+string(d)]
}

// fakeDecider is a conformant in-memory Decider over its policies, with an
// optional scripted failure per policy (of a set: per member).
type fakeDecider struct {
	ratelimittest.Fake // only for what a Decider needs and RLS never calls
	st                 *store
	policies           map[ratelimit.PolicyID]ratelimit.Policy
	fail               func(req ratelimit.Request) ratelimit.Outcome // nil: decide

	mu      sync.Mutex
	evals   int
	refunds int
	sets    int
	closed  bool
}

func (f *fakeDecider) Evaluate(ctx context.Context, req ratelimit.Request) ratelimit.Outcome {
	f.mu.Lock()
	f.evals++
	closed := f.closed
	f.mu.Unlock()
	if closed {
		return ratelimit.Unavailable{PolicyID: req.PolicyID, Category: ratelimit.CategoryClosed}
	}
	if err := req.Validate(); err != nil {
		return ratelimit.Unavailable{PolicyID: req.PolicyID, Category: ratelimit.CategoryInvalidRequest, Cause: err}
	}
	p, ok := f.policies[req.PolicyID]
	if !ok {
		return ratelimit.Unavailable{PolicyID: req.PolicyID, Category: ratelimit.CategoryUnknownPolicy}
	}
	if err := req.ValidateFor(p); err != nil {
		return ratelimit.Unavailable{PolicyID: req.PolicyID, Category: ratelimit.CategoryInvalidRequest, Cause: err}
	}
	if f.fail != nil {
		if o := f.fail(req); o != nil {
			return o
		}
	}
	now := time.Unix(1_000_000, 0)
	key := string(req.PolicyID) + "/" + string(p.Subject(req.SubjectDigest))
	f.st.mu.Lock()
	used := f.st.used[key]
	allowed := used+req.Cost <= p.Limit()
	if allowed {
		used += req.Cost
		f.st.used[key] = used
	}
	f.st.mu.Unlock()
	d := ratelimit.Decision{Allowed: allowed, Limit: p.Limit(), Remaining: p.Limit() - used, ServerNow: now,
		ResetAt: now.Add(30 * time.Second), PolicyID: p.ID(), PolicyRevision: p.Revision(), Source: ratelimit.GlobalRedis, Certainty: ratelimit.Certain}
	if allowed {
		d.Receipt = ratelimit.NewReceipt(p.ID(), p.Revision(), req.Cost, now.UnixMilli(), ratelimit.GlobalRedis)
	} else {
		d.RetryAfter = 30 * time.Second
	}
	return ratelimit.Evaluated{Decision: d}
}

func (f *fakeDecider) Refund(_ context.Context, req ratelimit.Request, r ratelimit.Receipt) ratelimit.Outcome {
	f.mu.Lock()
	f.refunds++
	f.mu.Unlock()
	p, ok := f.policies[req.PolicyID]
	if !ok || r.IsZero() || r.PolicyID() != req.PolicyID {
		return ratelimit.Unavailable{PolicyID: req.PolicyID, Category: ratelimit.CategoryInvalidRequest}
	}
	key := string(req.PolicyID) + "/" + string(p.Subject(req.SubjectDigest))
	f.st.mu.Lock()
	defer f.st.mu.Unlock()
	back := min(r.Cost(), f.st.used[key]) // saturating: never below zero used
	f.st.used[key] -= back
	return ratelimit.Evaluated{Decision: ratelimit.Decision{Allowed: true, Limit: p.Limit(), Remaining: p.Limit() - f.st.used[key],
		PolicyID: p.ID(), PolicyRevision: p.Revision(), Source: ratelimit.GlobalRedis, Certainty: ratelimit.Certain, Refunded: back}}
}

func (f *fakeDecider) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	return nil
}

func (f *fakeDecider) calls() (evals, refunds int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.evals, f.refunds
}

// fakePorts builds fakeDeciders over one store.
type fakePorts struct {
	st       *store
	file     map[ratelimit.PolicyID]ratelimit.Policy
	fail     func(req ratelimit.Request) ratelimit.Outcome
	forErr   error
	mu       sync.Mutex
	deciders []*fakeDecider
}

func newPorts(file ...ratelimit.Policy) *fakePorts {
	fp := &fakePorts{st: &store{used: map[string]int64{}}, file: map[ratelimit.PolicyID]ratelimit.Policy{}}
	for _, p := range file {
		fp.file[p.ID()] = p
	}
	return fp
}

func (fp *fakePorts) Policy(id ratelimit.PolicyID) (ratelimit.Policy, bool) {
	p, ok := fp.file[id]
	return p, ok
}

func (fp *fakePorts) For(policies []ratelimit.Policy) (rls.Decider, error) {
	if fp.forErr != nil {
		return nil, fp.forErr
	}
	d := &fakeDecider{st: fp.st, policies: map[ratelimit.PolicyID]ratelimit.Policy{}, fail: fp.fail}
	for _, p := range policies {
		d.policies[p.ID()] = p
	}
	fp.mu.Lock()
	fp.deciders = append(fp.deciders, d)
	fp.mu.Unlock()
	return d, nil
}

func (fp *fakePorts) last() *fakeDecider {
	fp.mu.Lock()
	defer fp.mu.Unlock()
	return fp.deciders[len(fp.deciders)-1]
}

// rule is one top-level descriptor of a test configuration.
type rule struct {
	key      string
	n        uint32
	policy   string
	shadow   bool
	detailed bool
}

// minuteRule is a fixed-window rule of n per minute under key.
func minuteRule(_ string, key string, n uint32) *rule { return &rule{key: key, n: n} }

// oneRule loads a configuration of domain with the rules, through
// rlsconfig (the reference's YAML).
func oneRule(domain string, rs ...*rule) *rlsconfig.Config {
	var b strings.Builder
	fmt.Fprintf(&b, "domain: %s\ndescriptors:\n", domain)
	for _, r := range rs {
		fmt.Fprintf(&b, "  - key: %s\n    shadow_mode: %v\n    detailed_metric: %v\n", r.key, r.shadow, r.detailed)
		if r.policy != "" {
			fmt.Fprintf(&b, "    rate_limit:\n      name: %s\n      policy: %s\n", r.key, r.policy)
		} else {
			fmt.Fprintf(&b, "    rate_limit:\n      name: %s\n      unit: minute\n      requests_per_unit: %d\n", r.key, r.n)
		}
	}
	cfg, err := rlsconfig.Load([]rlsconfig.File{{Name: domain + ".yaml", Data: []byte(b.String())}})
	if err != nil {
		panic(err)
	}
	return cfg
}

// testPseud is a Pseudonymizer like the composition root's: a keyed
// digest, recording the subjects it was given.
type testPseud struct {
	mu   sync.Mutex
	seen []string
}

func (p *testPseud) Pseudonymize(s string) (ratelimit.SubjectDigest, error) {
	if s == "" {
		return "", errors.New("empty subject")
	}
	p.mu.Lock()
	p.seen = append(p.seen, s)
	p.mu.Unlock()
	sum := sha256.Sum256([]byte("test-secret\x00" + s))
	return ratelimit.SubjectDigest(base64.RawURLEncoding.EncodeToString(sum[:])), nil
}

func digest(s string) ratelimit.SubjectDigest {
	d, _ := (&testPseud{}).Pseudonymize(s)
	return d
}

// countMetrics records what the service counted.
type countMetrics struct {
	mu        sync.Mutex
	decisions map[string]int // domain|key|result
	refused   map[string]int
	folded    int
	refundErr int
}

func newMetrics() *countMetrics {
	return &countMetrics{decisions: map[string]int{}, refused: map[string]int{}}
}

func (m *countMetrics) Decision(domain, key string, r rls.Result) {
	m.mu.Lock()
	m.decisions[domain+"|"+key+"|"+string(r)]++
	m.mu.Unlock()
}
func (m *countMetrics) Refused(reason string) { m.mu.Lock(); m.refused[reason]++; m.mu.Unlock() }
func (m *countMetrics) Folded(string)         { m.mu.Lock(); m.folded++; m.mu.Unlock() }
func (m *countMetrics) RefundFailed(string)   { m.mu.Lock(); m.refundErr++; m.mu.Unlock() }

func (m *countMetrics) get(key string) int { m.mu.Lock(); defer m.mu.Unlock(); return m.decisions[key] }

// fixture is a Service with a bufconn gRPC client.
type fixture struct {
	svc     *rls.Service
	ports   *fakePorts
	pseud   *testPseud
	metrics *countMetrics
	client  pb.RateLimitServiceClient
	conn    *grpc.ClientConn
}

func newFixture(t *testing.T, r rls.Rules, ports *fakePorts, opt rls.Options) *fixture {
	t.Helper()
	f := &fixture{ports: ports, pseud: &testPseud{}, metrics: newMetrics()}
	opt.Metrics = f.metrics
	svc, err := rls.New(ports, f.pseud, opt)
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Load(r); err != nil {
		t.Fatal(err)
	}
	f.svc = svc
	srv, _ := rls.NewGRPCServer(svc, rls.ServerOptions{})
	lis := bufconn.Listen(1 << 20)
	go func() { _ = srv.Serve(lis) }()
	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = conn.Close()
		srv.Stop()
		_ = svc.Close()
	})
	f.conn = conn
	f.client = pb.NewRateLimitServiceClient(conn)
	return f
}

func (f *fixture) call(t *testing.T, req *pb.RateLimitRequest) (*pb.RateLimitResponse, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return f.client.ShouldRateLimit(ctx, req)
}

func (f *fixture) must(t *testing.T, req *pb.RateLimitRequest) *pb.RateLimitResponse {
	t.Helper()
	resp, err := f.call(t, req)
	if err != nil {
		t.Fatalf("ShouldRateLimit: %v", err)
	}
	return resp
}

// desc is a descriptor of key=value pairs.
func desc(kv ...string) *commonpb.RateLimitDescriptor {
	d := &commonpb.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, &commonpb.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

func withHits(d *commonpb.RateLimitDescriptor, n uint64) *commonpb.RateLimitDescriptor {
	d.HitsAddend = wrapperspb.UInt64(n)
	return d
}

func request(domain string, ds ...*commonpb.RateLimitDescriptor) *pb.RateLimitRequest {
	return &pb.RateLimitRequest{Domain: domain, Descriptors: ds}
}

func headerValue(resp *pb.RateLimitResponse, key string) (string, bool) {
	for _, h := range resp.GetResponseHeadersToAdd() {
		if h.GetKey() == key {
			return h.GetValue(), true
		}
	}
	return "", false
}
