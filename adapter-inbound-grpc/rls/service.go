package rls

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tech-log/tech-log-backend/adapter-inbound-grpc/rlsconfig"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// Service implements envoy.service.ratelimit.v3.RateLimitService over the
// project's port. Most callers want New, then Load with each configuration
// generation, Register on a grpc.Server (or JSONHandler), and Close at
// shutdown. It is safe for concurrent use.
//
// A request is decided all or nothing (ADR 0031): its enforced
// descriptors in one policy-set call (EdgePort.EvaluateSet) when they can
// form a set, which takes nothing unless every one admits; otherwise
// charged in order, and when one is denied or undecided, those already
// admitted are refunded and later ones are not asked. Either way a denied
// request consumes nothing.
type Service struct {
	pb.UnimplementedRateLimitServiceServer

	ports Ports
	pseud Pseudonymizer
	opt   Options

	mu      sync.Mutex // serializes Load and Close
	current atomic.Pointer[generation]

	detailMu   sync.Mutex
	detailKeys map[string]struct{}
}

var _ pb.RateLimitServiceServer = (*Service)(nil)

// ErrNotLoaded: a request came before the first Load.
var ErrNotLoaded = errors.New("no configuration loaded")

// New returns a Service deciding through ports and pseud. Call Load before
// serving: until then every request is UNAVAILABLE.
func New(ports Ports, pseud Pseudonymizer, opt Options) (*Service, error) {
	var errs []error
	if ports == nil {
		errs = append(errs, fmt.Errorf("%w: Ports is nil", ErrInvalidOption))
	}
	if pseud == nil {
		errs = append(errs, fmt.Errorf("%w: Pseudonymizer is nil", ErrInvalidOption))
	}
	opt, err := opt.withDefaults()
	if err := errors.Join(append(errs, err)...); err != nil {
		return nil, err
	}
	return &Service{ports: ports, pseud: pseud, opt: opt, detailKeys: make(map[string]struct{})}, nil
}

// Load builds a generation for rules (every rule's policy and a Decider
// from Ports.For) and serves it from now on; the previous generation's
// Decider is closed once its last request has finished. On error nothing
// changes: the previous generation keeps serving.
func (s *Service) Load(rules Rules) error {
	g, err := newGeneration(rules, s.ports)
	if err != nil {
		return err
	}
	s.mu.Lock()
	old := s.current.Swap(g)
	s.mu.Unlock()
	if old != nil {
		// Waits for the old generation's requests (bounded by their
		// evaluation timeout), then closes its Decider.
		go func() {
			if err := old.retire(); err != nil {
				s.opt.Log.Warn("rls: closing the previous generation's decision port", "err", err)
			}
		}()
	}
	return nil
}

// Loaded reports whether a configuration is being served.
func (s *Service) Loaded() bool { return s.current.Load() != nil }

// Close retires the current generation (waiting for its requests) and
// closes its Decider. Requests after Close are UNAVAILABLE.
func (s *Service) Close() error {
	s.mu.Lock()
	old := s.current.Swap(nil)
	s.mu.Unlock()
	if old == nil {
		return nil
	}
	return old.retire()
}

// acquire returns the current generation read-locked, or nil.
func (s *Service) acquire() *generation {
	for {
		g := s.current.Load()
		if g == nil {
			return nil
		}
		if g.acquire() {
			return g
		}
		// Retired between Load and RLock: the next one is current.
	}
}

// kind is what a descriptor asks for.
type kind int

const (
	kindNone      kind = iota + 1 // no rule, a replaced rule
	kindUnlimited                 // an unlimited rule
	kindCharge                    // take cost units
	kindCheck                     // hits_addend 0: would one unit be admitted?
	kindNegative                  // is_negative_hits: give cost units back
)

// plan is one descriptor's part of a request.
type plan struct {
	kind    kind
	rule    *rlsconfig.RateLimit
	policy  ratelimit.Policy
	subject ratelimit.SubjectDigest
	cost    int64
	shadow  bool
	metric  string // the metric key: FullKey or a detailed key

	// Filled while deciding.
	decided  bool // an Evaluated decision is in dec
	dec      ratelimit.Decision
	over     bool // the descriptor answers OVER_LIMIT (enforced or not)
	refund   bool // dec.Receipt is to be given back at the end
	outcome  ratelimit.Outcome
	undecide bool
	// setMember: decided by the request's one EvaluateSet (setMembers).
	setMember bool
}

// ShouldRateLimit implements pb.RateLimitServiceServer.
func (s *Service) ShouldRateLimit(ctx context.Context, req *pb.RateLimitRequest) (*pb.RateLimitResponse, error) {
	if err := s.checkBounds(req); err != nil {
		return nil, err
	}
	g := s.acquire()
	if g == nil {
		s.opt.Metrics.Refused("not_loaded")
		return nil, status.Error(codes.Unavailable, "rls: "+ErrNotLoaded.Error())
	}
	defer g.mu.RUnlock()
	domain := req.GetDomain()
	if !g.rules.HasDomain(domain) {
		s.opt.Metrics.Refused("unknown_domain")
		return nil, status.Errorf(codes.NotFound, "rls: domain %q is not configured", bound(domain))
	}
	plans, err := s.plan(g, req)
	if err != nil {
		return nil, err
	}
	deadline := s.opt.Now().Add(s.opt.EvaluationTimeout)
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	failed := s.decide(ctx, g.decider, plans, deadline)
	return s.respond(domain, plans, failed)
}

// refusal is an INVALID_ARGUMENT counted under reason.
func (s *Service) refusal(reason, format string, args ...any) error {
	s.opt.Metrics.Refused(reason)
	return status.Errorf(codes.InvalidArgument, "rls: "+format, args...)
}

// checkBounds refuses a request beyond Options.Bounds, before anything is
// looked up. Messages name the field and its index, never a value.
func (s *Service) checkBounds(req *pb.RateLimitRequest) error {
	b := s.opt.Bounds
	if req == nil {
		return s.refusal("empty", "no request")
	}
	if req.GetDomain() == "" {
		return s.refusal("domain", "domain must not be empty")
	}
	if len(req.GetDomain()) > b.MaxKeyLen {
		return s.refusal("domain", "domain is %d bytes, at most %d", len(req.GetDomain()), b.MaxKeyLen)
	}
	if uint64(req.GetHitsAddend()) > b.MaxHitsAddend {
		return s.refusal("hits_addend", "hits_addend %d above %d", req.GetHitsAddend(), b.MaxHitsAddend)
	}
	ds := req.GetDescriptors()
	if len(ds) == 0 {
		return s.refusal("descriptors", "descriptors must not be empty")
	}
	if len(ds) > b.MaxDescriptors {
		return s.refusal("descriptors", "%d descriptors, at most %d", len(ds), b.MaxDescriptors)
	}
	for i, d := range ds {
		es := d.GetEntries()
		if len(es) == 0 {
			return s.refusal("entries", "descriptors[%d]: entries must not be empty", i)
		}
		if len(es) > b.MaxEntries {
			return s.refusal("entries", "descriptors[%d]: %d entries, at most %d", i, len(es), b.MaxEntries)
		}
		for j, e := range es {
			if n := len(e.GetKey()); n == 0 || n > b.MaxKeyLen {
				return s.refusal("key", "descriptors[%d].entries[%d].key is %d bytes, want 1..%d", i, j, n, b.MaxKeyLen)
			}
			if n := len(e.GetValue()); n > b.MaxValueLen {
				return s.refusal("value", "descriptors[%d].entries[%d].value is %d bytes, at most %d", i, j, n, b.MaxValueLen)
			}
		}
		if h := d.GetHitsAddend(); h != nil && h.GetValue() > b.MaxHitsAddend {
			return s.refusal("hits_addend", "descriptors[%d].hits_addend %d above %d", i, h.GetValue(), b.MaxHitsAddend)
		}
		if d.GetIsNegativeHits() && !s.opt.NegativeHits {
			return s.refusal("negative_hits", "descriptors[%d].is_negative_hits is not enabled on this service", i)
		}
	}
	return nil
}

// plan matches every descriptor to its limit (rlsconfig.Lookup, then the
// reference's replaces) and works out what it asks for; it refuses
// duplicates and subjects the pseudonymizer rejects.
func (s *Service) plan(g *generation, req *pb.RateLimitRequest) ([]*plan, error) {
	domain := req.GetDomain()
	ds := req.GetDescriptors()
	plans := make([]*plan, len(ds))
	matched := make([]*rlsconfig.RateLimit, len(ds))
	lookups := make([]rlsconfig.Matched, len(ds))
	entries := make([][]rlsconfig.Entry, len(ds))
	for i, d := range ds {
		entries[i] = make([]rlsconfig.Entry, len(d.GetEntries()))
		for j, e := range d.GetEntries() {
			entries[i][j] = rlsconfig.Entry{Key: e.GetKey(), Value: e.GetValue()}
		}
		lookups[i] = g.rules.Lookup(domain, entries[i])
		matched[i] = lookups[i].Limit
	}
	check, unlimited := rlsconfig.ApplyReplaces(matched)
	for i, d := range ds {
		rl := matched[i]
		p := &plan{kind: kindNone, rule: rl}
		plans[i] = p
		if rl == nil {
			continue
		}
		p.metric = s.metricKey(domain, rl, lookups[i].StatsKey)
		if unlimited[i] {
			p.kind = kindUnlimited
			continue
		}
		pol, ok := g.policies[rl]
		if check[i] == nil || !ok {
			// Replaced by another matched limit (or a limit without a
			// policy): nothing to decide.
			continue
		}
		p.policy = pol
		// A rule naming a shadow policy (the policy file's "enforce":
		// "shadow") is a shadow rule, as shadow_mode makes one (ADR 0037).
		p.shadow = rl.ShadowMode || s.opt.ShadowMode || pol.Shadow()
		hits := uint64(req.GetHitsAddend())
		if hits == 0 {
			hits = 1
		}
		if h := d.GetHitsAddend(); h != nil {
			hits = h.GetValue()
		}
		switch {
		case d.GetIsNegativeHits():
			p.kind = kindNegative
		case hits == 0:
			p.kind, hits = kindCheck, 1
		default:
			p.kind = kindCharge
		}
		p.cost = int64(hits) // hits <= MaxHitsAddend <= 2^32
		// share_threshold: every value a wildcard matches is one subject.
		sub, err := s.pseud.Pseudonymize(subjectOf(lookups[i].CounterEntries(entries[i])))
		if err != nil {
			s.opt.Metrics.Refused("subject")
			return nil, status.Errorf(codes.InvalidArgument, "rls: descriptors[%d]: the subject cannot be pseudonymized", i)
		}
		p.subject = sub
	}
	for i, p := range plans {
		if p.kind != kindCharge && p.kind != kindNegative {
			continue
		}
		for j, q := range plans[:i] {
			if q.kind == p.kind && q.policy.ID() == p.policy.ID() && q.subject == p.subject {
				return nil, s.refusal("duplicate", "descriptors[%d] repeats descriptors[%d] (same limit and subject)", i, j)
			}
		}
	}
	return plans, nil
}

// subjectOf is a descriptor's subject: its one value as it is, so that
// `user=alice` is the HTTP edge's principal alice; with several entries,
// "rls:" + the unpadded base64url SHA-256 of the length-prefixed keys and
// values, so that no two entry lists share a subject string. Either way
// the Pseudonymizer keys it; neither form is ever logged.
func subjectOf(entries []rlsconfig.Entry) string {
	if len(entries) == 1 && printable(entries[0].Value) {
		return entries[0].Value
	}
	h := sha256.New()
	for _, e := range entries {
		_, _ = h.Write([]byte(strconv.Itoa(len(e.Key)) + ":" + e.Key + strconv.Itoa(len(e.Value)) + ":" + e.Value))
	}
	return "rls:" + base64.RawURLEncoding.EncodeToString(h.Sum(nil))
}

// printable reports whether v is 1.. bytes of printable ASCII (what the
// HTTP edge accepts as a principal).
func printable(v string) bool {
	if v == "" {
		return false
	}
	for i := 0; i < len(v); i++ {
		if v[i] < 0x20 || v[i] > 0x7e {
			return false
		}
	}
	return true
}

// metricKey is a descriptor's metric label: the limit's FullKey, or the
// request's stats key (which detailed_metric, value_to_metric and
// share_threshold fill with descriptor values) while fewer than
// DetailedMetricCap distinct such keys have been seen; beyond the cap the
// FullKey again, counted by Folded.
func (s *Service) metricKey(domain string, rl *rlsconfig.RateLimit, statsKey string) string {
	if statsKey == "" || statsKey == rl.FullKey {
		return rl.FullKey
	}
	s.detailMu.Lock()
	defer s.detailMu.Unlock()
	if _, ok := s.detailKeys[statsKey]; ok {
		return statsKey
	}
	if len(s.detailKeys) < s.opt.DetailedMetricCap {
		s.detailKeys[statsKey] = struct{}{}
		return statsKey
	}
	s.opt.Metrics.Folded(domain)
	return rl.FullKey
}
