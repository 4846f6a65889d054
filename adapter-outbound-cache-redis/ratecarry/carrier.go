package ratecarry

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/programs"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redisrate"
	"github.com/tech-log/tech-log-backend/shared-contract/keyspace"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// Inner is what a Carrier decorates: the provider, with the local
// fallback's reconciliation charges (ratefallback.Provider's methods).
type Inner interface {
	ratelimit.EdgePort
	// EvaluateAfterCharge is Evaluate with units charged to the subject
	// first, in the same round trip; charged: the server ran the charge.
	EvaluateAfterCharge(ctx context.Context, req ratelimit.Request, units int64) (out ratelimit.Outcome, charged bool)
	// Charge charges units to the subject alone.
	Charge(ctx context.Context, req ratelimit.Request, units int64) ratelimit.Outcome
}

// Defaults and bounds of Options.
const (
	// DefaultMaxSubjects bounds the subjects remembered as checked, per
	// policy with a predecessor; a full table is cleared (its subjects are
	// checked again, one read-only program each).
	DefaultMaxSubjects = 100_000
	MaxSubjects        = 10_000_000
	// maxSeedAttempts bounds the seed's retries when the predecessor's
	// state changes between the check and the seed (another instance
	// still deciding on it).
	maxSeedAttempts = 3
)

// Result is what a check did (a metric label).
type Result string

// The results of a check.
const (
	// Carried: the new state was seeded from the predecessor's.
	Carried Result = "carried"
	// Fresh: there was nothing to carry (no predecessor state) or the new
	// state existed already.
	Fresh Result = "nothing"
	// Failed: the check or the seed failed; the decision went on.
	Failed Result = "error"
)

// Options configures a Carrier.
type Options struct {
	// Client runs the check and the seed (the provider's client);
	// required.
	Client redis.UniversalClient
	// Keys derives the state keys (redisrate.StateKey); required.
	Keys *keyspace.Builder
	// Policies are the provider's policies; Predecessors maps some of them
	// (by ID) to the policy whose state their subjects carry: the same ID
	// at another revision. At least one.
	Policies     []ratelimit.Policy
	Predecessors map[ratelimit.PolicyID]ratelimit.Policy
	// Catalog, optional, is where Start finds the predecessors of the
	// policies Predecessors does not give (a process started on a new
	// revision) and records Policies as served. With it, Predecessors may
	// be empty.
	Catalog *Catalog
	// MaxSubjects bounds each policy's table; 0 means DefaultMaxSubjects.
	MaxSubjects int
	// Observe, optional, is told each check's result with its policy.
	Observe func(policy ratelimit.PolicyID, r Result)
}

// Carrier is the decorator (see the package doc). Safe for concurrent
// use.
type Carrier struct {
	inner    Inner
	client   redis.UniversalClient
	keys     *keyspace.Builder
	max      int
	observe  func(ratelimit.PolicyID, Result)
	catalog  *Catalog
	policies []ratelimit.Policy
	// by is the successions by policy ID: set by New, replaced (never
	// changed in place) by Start.
	by atomic.Pointer[map[ratelimit.PolicyID]*succession]
}

// succession is one policy with its predecessor and the subjects checked.
type succession struct {
	policy, pred ratelimit.Policy
	mu           sync.Mutex
	checked      map[ratelimit.SubjectDigest]struct{}
	n            atomic.Int64 // len(checked), read without the lock
}

var _ Inner = (*Carrier)(nil)

// ErrInvalidOptions wraps every error New returns.
var ErrInvalidOptions = errors.New("ratecarry: invalid options")

// New returns the carrier over inner.
func New(inner Inner, opts Options) (*Carrier, error) {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidOptions}, args...)...))
	}
	if inner == nil || opts.Client == nil || opts.Keys == nil {
		bad("inner port, Options.Client and Options.Keys are required")
	}
	if opts.MaxSubjects == 0 {
		opts.MaxSubjects = DefaultMaxSubjects
	}
	if opts.MaxSubjects < 1 || opts.MaxSubjects > MaxSubjects {
		bad("Options.MaxSubjects %d must be in 1..%d", opts.MaxSubjects, MaxSubjects)
	}
	c := &Carrier{inner: inner, client: opts.Client, keys: opts.Keys, max: opts.MaxSubjects, observe: opts.Observe,
		catalog: opts.Catalog, policies: opts.Policies}
	by := map[ratelimit.PolicyID]*succession{}
	current := map[ratelimit.PolicyID]ratelimit.Policy{}
	for _, p := range opts.Policies {
		current[p.ID()] = p
	}
	for id, pred := range opts.Predecessors {
		p, ok := current[id]
		switch {
		case !ok:
			bad("Options.Predecessors: %q is not among Options.Policies", id)
		case pred.IsZero() || pred.ID() != id || pred.Revision() == p.Revision():
			bad("Options.Predecessors[%q]: not another revision of the policy", id)
		default:
			by[id] = newSuccession(p, pred)
		}
	}
	if len(by) == 0 && opts.Catalog == nil {
		bad("Options.Predecessors: none, and no Options.Catalog")
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	c.by.Store(&by)
	return c, nil
}

func newSuccession(p, pred ratelimit.Policy) *succession {
	return &succession{policy: p, pred: pred, checked: map[ratelimit.SubjectDigest]struct{}{}}
}

// Start, with a catalog, adds the catalog's predecessor of every policy
// without one (the revision of its ID recorded last, other than its own),
// then records the policies as served. Without a catalog it does nothing.
// Its error (the server unreachable) leaves the predecessors as they
// were: a process that could not read the catalog carries nothing from it.
func (c *Carrier) Start(ctx context.Context) error {
	if c.catalog == nil {
		return nil
	}
	preds, err := c.catalog.Predecessors(ctx, c.policies)
	if err != nil {
		return err
	}
	by := maps.Clone(*c.by.Load())
	for _, p := range c.policies {
		if pred, ok := preds[p.ID()]; ok && by[p.ID()] == nil {
			by[p.ID()] = newSuccession(p, pred)
		}
	}
	c.by.Store(&by)
	return c.catalog.Record(ctx, c.policies)
}

// Evaluate carries req's subject's state first when its policy has a
// predecessor (once per subject), then decides.
func (c *Carrier) Evaluate(ctx context.Context, req ratelimit.Request) (out ratelimit.Outcome) {
	defer ratelimit.Recover(&out, req.PolicyID, "ratecarry")
	c.ensure(ctx, req.PolicyID, req.SubjectDigest, req.EffectiveDeadline(ctx))
	return c.inner.Evaluate(ctx, req)
}

// EvaluateSet carries each member's subject first.
func (c *Carrier) EvaluateSet(ctx context.Context, req ratelimit.SetRequest) (out ratelimit.Outcome) {
	defer ratelimit.Recover(&out, "", "ratecarry")
	deadline := ratelimit.Request{Deadline: req.Deadline}.EffectiveDeadline(ctx)
	for i, id := range req.Members {
		subject := req.SubjectDigest
		if req.Subjects != nil && i < len(req.Subjects) {
			subject = req.Subjects[i]
		}
		c.ensure(ctx, id, subject, deadline)
	}
	return c.inner.EvaluateSet(ctx, req)
}

// Refund passes on: a receipt of the predecessor refunds nothing.
func (c *Carrier) Refund(ctx context.Context, req ratelimit.Request, r ratelimit.Receipt) ratelimit.Outcome {
	return c.inner.Refund(ctx, req, r)
}

// EvaluateAfterCharge carries first, then passes on.
func (c *Carrier) EvaluateAfterCharge(ctx context.Context, req ratelimit.Request, units int64) (ratelimit.Outcome, bool) {
	c.ensure(ctx, req.PolicyID, req.SubjectDigest, req.EffectiveDeadline(ctx))
	return c.inner.EvaluateAfterCharge(ctx, req, units)
}

// Charge carries first, then passes on.
func (c *Carrier) Charge(ctx context.Context, req ratelimit.Request, units int64) ratelimit.Outcome {
	c.ensure(ctx, req.PolicyID, req.SubjectDigest, req.EffectiveDeadline(ctx))
	return c.inner.Charge(ctx, req, units)
}

// ensure checks, once per subject, that the subject's state under id
// carries its predecessor's. An invalid subject is left to the provider's
// validation.
func (c *Carrier) ensure(ctx context.Context, id ratelimit.PolicyID, subject ratelimit.SubjectDigest, deadline time.Time) {
	s := (*c.by.Load())[id]
	if s == nil || subject.Validate() != nil {
		return
	}
	subject = s.policy.Subject(subject)
	s.mu.Lock()
	_, done := s.checked[subject]
	s.mu.Unlock()
	if done {
		return
	}
	dctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	r, err := c.carry(dctx, s, subject)
	if err != nil {
		c.told(id, Failed)
		return
	}
	c.told(id, r)
	s.mu.Lock()
	if len(s.checked) >= c.max {
		clear(s.checked)
	}
	s.checked[subject] = struct{}{}
	s.n.Store(int64(len(s.checked)))
	s.mu.Unlock()
}

func (c *Carrier) told(id ratelimit.PolicyID, r Result) {
	if c.observe != nil {
		c.observe(id, r)
	}
}

// carry is the check and, when it applies, the seed.
func (c *Carrier) carry(ctx context.Context, s *succession, subject ratelimit.SubjectDigest) (Result, error) {
	newKey, err := redisrate.StateKey(c.keys, s.policy, subject)
	if err != nil {
		return Failed, err
	}
	oldKey, err := redisrate.StateKey(c.keys, s.pred, subject)
	if err != nil {
		return Failed, err
	}
	mark, err := MarkKey(c.keys, s.policy, subject)
	if err != nil {
		return Failed, err
	}
	keys := []string{newKey, oldKey, mark}
	for range maxSeedAttempts {
		v, err := checkScript.Run(ctx, c.client, keys).Slice()
		if err != nil {
			return Failed, fmt.Errorf("ratecarry: check: %w", err)
		}
		if len(v) == 1 {
			return Fresh, nil // the new state exists
		}
		if len(v) != 4 {
			return Failed, fmt.Errorf("ratecarry: check: reply of %d elements", len(v))
		}
		old, _ := v[1].(string)
		if old == "" {
			return Fresh, nil
		}
		now, err := serverMillis(v[2], v[3])
		if err != nil {
			return Failed, err
		}
		args, err := seedArgs(s, programs.State(old), now)
		if err != nil {
			return Failed, err
		}
		n, err := seedScript.Run(ctx, c.client, keys, args...).Int64()
		if err != nil {
			return Failed, fmt.Errorf("ratecarry: seed: %w", err)
		}
		switch n {
		case 1:
			return Carried, nil
		case 0:
			return Fresh, nil
		}
	}
	return Failed, fmt.Errorf("ratecarry: the predecessor's state changed during each of %d attempts", maxSeedAttempts)
}

// KeyKindMark is the kind of a carry's mark: <prefix>:rate:<policyID>:c:v2:{<slot
// tag>}<digest over (policy ID, revision, subject)>, in the subject's
// slot (its state keys' tag). No state key has kind "c".
const KeyKindMark = "c"

// MarkKey is the key of the mark that subject's state under p was carried
// from its predecessor (seedScript).
func MarkKey(keys *keyspace.Builder, p ratelimit.Policy, subject ratelimit.SubjectDigest) (string, error) {
	id := string(p.ID())
	return keys.TaggedKey(redisrate.KeyCapability, id, KeyKindMark, string(subject), id, strconv.FormatInt(p.Revision(), 10), string(subject))
}

// seedArgs is the seed's ARGV for the predecessor's state old at server
// time now: old itself; the new state, charged with what old consumed
// (programs.Carry's rule, at most the new limit, and at least 1: an
// existing predecessor state always leaves a new state behind, which
// instances still deciding by the predecessor cannot reach); the
// predecessor charged to empty.
func seedArgs(s *succession, old programs.State, now int64) ([]any, error) {
	units := max(1, programs.CarriedUnits(s.pred, old, s.policy, now))
	st, ttl := programs.ChargedState(s.policy, nil, now, units)
	if st == nil {
		return nil, fmt.Errorf("ratecarry: the model refused to carry %d units into %q", units, s.policy.ID())
	}
	args := []any{string(old), string(st), ttl, "", 0}
	if spent, ttl := programs.ChargedState(s.pred, old, now, s.pred.Limit()); spent != nil {
		args[3], args[4] = string(spent), ttl
	}
	return args, nil
}

// serverMillis reads TIME's two elements as milliseconds.
func serverMillis(sec, usec any) (int64, error) {
	s, ok1 := sec.(string)
	u, ok2 := usec.(string)
	si, err1 := strconv.ParseInt(s, 10, 64)
	ui, err2 := strconv.ParseInt(u, 10, 64)
	if !ok1 || !ok2 || err1 != nil || err2 != nil || si < 0 || ui < 0 || ui >= 1_000_000 {
		return 0, fmt.Errorf("ratecarry: check: TIME %v %v is not a time", sec, usec)
	}
	return si*1000 + ui/1000, nil
}

// Checked is how many subjects each policy with a predecessor has checked
// (its table's size), by policy.
func (c *Carrier) Checked() map[ratelimit.PolicyID]int64 {
	by := *c.by.Load()
	out := make(map[ratelimit.PolicyID]int64, len(by))
	for id, s := range by {
		out[id] = s.n.Load()
	}
	return out
}
