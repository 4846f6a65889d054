package rateplan

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/programs"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/ratedenial"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redisrate"
	"github.com/tech-log/tech-log-backend/shared-contract/keyspace"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// Key segments of an assignment: <prefix>:rate:plan:plan:v2:{<slot
// tag>}<digest>, the digest over ("plan", subject digest) and the slot tag
// of every state key of the subject, so an assignment and the subject's
// states are in one Redis Cluster slot (one transaction moves them). No
// state key has kind "plan".
const (
	KeyRegion = "plan"
	KeyKind   = "plan"
)

// The fields of an assignment's hash: the plan ID, the time (ms) it was
// set at, and, for each plan policy the subject left, its state as it was
// when it left (FieldLeftPrefix + policy ID), so that coming back carries
// what it had consumed there (Store.Set). A hash with no plan field is no
// assignment (the default plan) that remembers left states.
const (
	FieldPlan       = "plan"
	FieldAt         = "at"
	FieldLeftPrefix = "left:"
)

// maxAttempts bounds the optimistic transaction of a change: another
// writer of the subject's state between its reads and its EXEC makes it
// start again.
const maxAttempts = 16

// Key is subject's assignment key.
func Key(keys *keyspace.Builder, subject ratelimit.SubjectDigest) (string, error) {
	return keys.TaggedKey(redisrate.KeyCapability, KeyRegion, KeyKind, string(subject), KeyKind, string(subject))
}

// Pattern matches every assignment key under keys' prefix (SCAN MATCH).
func Pattern(keys *keyspace.Builder) string {
	return keys.Prefix() + ":" + redisrate.KeyCapability + ":" + KeyRegion + ":" + KeyKind + ":*"
}

// ErrUnknownPlan: a plan the policy file does not have was asked for.
var ErrUnknownPlan = errors.New("unknown plan")

// Assignment is a subject's stored plan.
type Assignment struct {
	// Plan is the plan as stored: it may name a plan the file no longer
	// has (the subject is then on the default plan, Plans.Effective).
	Plan ratelimit.PlanID
	// At is when it was set, on the clock of the host that set it; zero
	// when unknown.
	At time.Time
}

// Store reads and changes assignments; tlbctl plan's commands use it.
// It is safe for concurrent use.
type Store struct {
	client   redis.UniversalClient
	keys     *keyspace.Builder
	plans    ratelimit.Plans
	policies map[ratelimit.PolicyID]ratelimit.Policy
}

// NewStore returns a store of the assignments of plans (a policy file's,
// whose policies are policies) through client.
func NewStore(client redis.UniversalClient, keys *keyspace.Builder, plans ratelimit.Plans, policies []ratelimit.Policy) (*Store, error) {
	if client == nil || keys == nil {
		return nil, errors.New("rateplan: store: client and keys are required")
	}
	if plans.IsZero() {
		return nil, errors.New("rateplan: store: the policy file has no plans")
	}
	s := &Store{client: client, keys: keys, plans: plans, policies: map[ratelimit.PolicyID]ratelimit.Policy{}}
	for _, p := range policies {
		s.policies[p.ID()] = p
	}
	for _, base := range plans.Bases() {
		for _, id := range plans.Family(base) {
			if _, ok := s.policies[id]; !ok {
				return nil, fmt.Errorf("rateplan: store: policy %q of a plan is not among the policies", id)
			}
		}
	}
	return s, nil
}

// Get returns subject's assignment; false when it has none (it is on the
// default plan).
func (s *Store) Get(ctx context.Context, subject ratelimit.SubjectDigest) (Assignment, bool, error) {
	key, err := Key(s.keys, subject)
	if err != nil {
		return Assignment{}, false, fmt.Errorf("rateplan: assignment key: %w", err)
	}
	fields, err := s.client.HGetAll(ctx, key).Result()
	if err != nil {
		return Assignment{}, false, fmt.Errorf("rateplan: HGETALL: %w", err)
	}
	return assignmentOf(fields)
}

// assignmentOf reads an assignment's hash (HGETALL): false for none; an
// error for a plan that is not a plan ID or a time that is not an integer.
func assignmentOf(fields map[string]string) (Assignment, bool, error) {
	plan, ok := fields[FieldPlan]
	if !ok {
		return Assignment{}, false, nil
	}
	a := Assignment{Plan: ratelimit.PlanID(plan)}
	if err := a.Plan.Validate(); err != nil {
		return Assignment{}, false, fmt.Errorf("rateplan: stored %s: %w", FieldPlan, err)
	}
	if at, ok := fields[FieldAt]; ok {
		ms, err := strconv.ParseInt(at, 10, 64)
		if err != nil || ms < 0 {
			return Assignment{}, false, fmt.Errorf("rateplan: stored %s %q is not a time in ms", FieldAt, truncate(at))
		}
		a.At = time.UnixMilli(ms)
	}
	return a, true, nil
}

// truncate bounds stored text quoted in an error.
func truncate(s string) string {
	if len(s) > 32 {
		return s[:32] + "..."
	}
	return s
}

// Change is what Set or Unset did.
type Change struct {
	// From and To are the subject's effective plans before and after.
	From, To ratelimit.PlanID
	// Moves are the base policies whose deciding policy changed, with
	// what was carried (ADR 0039).
	Moves []Move
	// Published is how many subscribed connections heard the change (the
	// instances' plan caches and denial caches drop their entries); 0 for
	// a Preview.
	Published int64
}

// ErrNotPublished is wrapped by the error of a change that was committed
// but whose invalidation could not be published: instances see it within
// their cache's TTL and deny meanwhile (the old state is empty).
var ErrNotPublished = errors.New("rateplan: the change is committed, but its invalidation was not published")

// Move is one base policy's change of deciding policy.
type Move struct {
	Base, From, To ratelimit.PolicyID
	// Consumed is what the subject had consumed of From's limit at the
	// change; Carried what To starts with as consumed (at most To's limit).
	Consumed, Carried int64
}

// Set assigns subject to plan (one of the file's plans). In one
// transaction with the assignment, for every base policy whose deciding
// policy changes from A to B (ADR 0040):
//   - B's state holds at least what the subject consumed under A, at most
//     B's limit (programs.Carry), and at least what it had consumed under
//     B when it last left B (the state remembered then, as time has
//     evolved it): so moving back and forth never hands out a budget;
//   - A's state is remembered in the assignment, then charged to empty: an
//     instance that still decides by the old plan until it hears the
//     change denies instead of admitting.
//
// Then the assignment key and every state key written are published on
// the invalidation channel (an error wrapping ErrNotPublished when that
// fails after the commit).
func (s *Store) Set(ctx context.Context, subject ratelimit.SubjectDigest, plan ratelimit.PlanID) (Change, error) {
	if !s.plans.Has(plan) {
		return Change{}, fmt.Errorf("rateplan: %w %q: the policy file's plans are %v", ErrUnknownPlan, plan, s.plans.IDs())
	}
	return s.assign(ctx, subject, plan, true)
}

// Unset removes subject's assignment: it is on the default plan, with its
// consumption carried as Set carries it.
func (s *Store) Unset(ctx context.Context, subject ratelimit.SubjectDigest) (Change, error) {
	return s.assign(ctx, subject, "", true)
}

// Preview is what Set (plan not "") or Unset (plan "") would do now,
// changing nothing.
func (s *Store) Preview(ctx context.Context, subject ratelimit.SubjectDigest, plan ratelimit.PlanID) (Change, error) {
	if plan != "" && !s.plans.Has(plan) {
		return Change{}, fmt.Errorf("rateplan: %w %q: the policy file's plans are %v", ErrUnknownPlan, plan, s.plans.IDs())
	}
	return s.assign(ctx, subject, plan, false)
}

// move is one Move with its keys and the states it writes.
type move struct {
	Move
	fromKey, toKey     string
	fromState, toState programs.State
	fromTTL, toTTL     int64
	// left is the old policy's state before the change (nil: none), kept
	// in the assignment under FieldLeftPrefix + From.
	left programs.State
}

func (s *Store) assign(ctx context.Context, subject ratelimit.SubjectDigest, plan ratelimit.PlanID, write bool) (Change, error) {
	if err := subject.Validate(); err != nil {
		return Change{}, fmt.Errorf("rateplan: subject: %w", err)
	}
	akey, err := Key(s.keys, subject)
	if err != nil {
		return Change{}, fmt.Errorf("rateplan: assignment key: %w", err)
	}
	var change Change
	var moves []move
	txn := func(tx *redis.Tx) error {
		fields, err := tx.HGetAll(ctx, akey).Result()
		if err != nil {
			return fmt.Errorf("HGETALL: %w", err)
		}
		change = Change{From: s.plans.Effective(ratelimit.PlanID(fields[FieldPlan])), To: s.plans.Effective(plan)}
		moves, err = s.moves(subject, change.From, change.To)
		if err != nil {
			return err
		}
		if len(moves) > 0 {
			watch := make([]string, 0, 2*len(moves))
			for _, m := range moves {
				watch = append(watch, m.fromKey, m.toKey)
			}
			if err := tx.Watch(ctx, watch...).Err(); err != nil {
				return fmt.Errorf("WATCH: %w", err)
			}
			t, err := tx.Time(ctx).Result()
			if err != nil {
				return fmt.Errorf("TIME: %w", err)
			}
			now := t.UnixMilli()
			for i := range moves {
				var back programs.State // nil unless the subject left To before
				if v, ok := fields[FieldLeftPrefix+string(moves[i].To)]; ok && v != "" {
					back = programs.State(v)
				}
				if err := s.carry(ctx, tx, &moves[i], back, now); err != nil {
					return err
				}
			}
		}
		if !write {
			return nil
		}
		_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			for _, m := range moves {
				if m.toState != nil {
					p.Set(ctx, m.toKey, string(m.toState), time.Duration(m.toTTL)*time.Millisecond)
				} else {
					p.Del(ctx, m.toKey)
				}
				if m.fromState != nil {
					p.Set(ctx, m.fromKey, string(m.fromState), time.Duration(m.fromTTL)*time.Millisecond)
				}
			}
			p.Del(ctx, akey)
			if kept := remembered(fields, moves, plan); len(kept) > 0 {
				p.HSet(ctx, akey, kept)
			}
			return nil
		})
		return err
	}
	for attempt := 1; ; attempt++ {
		err = s.client.Watch(ctx, txn, akey)
		if !errors.Is(err, redis.TxFailedErr) {
			break
		}
		if attempt == maxAttempts {
			return Change{}, fmt.Errorf("rateplan: the subject's state changed during each of %d attempts; try again", maxAttempts)
		}
	}
	if err != nil {
		return Change{}, fmt.Errorf("rateplan: change of plan: %w", err)
	}
	for _, m := range moves {
		change.Moves = append(change.Moves, m.Move)
	}
	if !write {
		return change, nil
	}
	published := []string{akey}
	for _, m := range moves {
		published = append(published, m.toKey, m.fromKey)
	}
	for _, key := range published {
		n, err := ratedenial.Publish(ctx, s.client, key)
		if err != nil {
			return change, fmt.Errorf("%w (instances see it within their cache's TTL, denying meanwhile): %w", ErrNotPublished, err)
		}
		change.Published = max(change.Published, n)
	}
	return change, nil
}

// moves lists the base policies whose deciding policy differs between the
// plans from and to, with their state keys.
func (s *Store) moves(subject ratelimit.SubjectDigest, from, to ratelimit.PlanID) ([]move, error) {
	var out []move
	for _, base := range s.plans.Bases() {
		pf, pt := s.plans.Resolve(from, base), s.plans.Resolve(to, base)
		if pf == pt {
			continue
		}
		fk, err := redisrate.StateKey(s.keys, s.policies[pf], subject)
		if err != nil {
			return nil, fmt.Errorf("state key of %q: %w", pf, err)
		}
		tk, err := redisrate.StateKey(s.keys, s.policies[pt], subject)
		if err != nil {
			return nil, fmt.Errorf("state key of %q: %w", pt, err)
		}
		out = append(out, move{Move: Move{Base: base, From: pf, To: pt}, fromKey: fk, toKey: tk})
	}
	return out, nil
}

// remembered is the assignment's hash after a change to plan (""
// unset): the plan and its time when set, the left states of fields the
// change keeps (not those of the policies it moves to, whose states are
// live again), and the left state of every policy it moves from.
func remembered(fields map[string]string, moves []move, plan ratelimit.PlanID) map[string]any {
	out := map[string]any{}
	for k, v := range fields {
		if strings.HasPrefix(k, FieldLeftPrefix) {
			out[k] = v
		}
	}
	for _, m := range moves {
		delete(out, FieldLeftPrefix+string(m.To))
		delete(out, FieldLeftPrefix+string(m.From))
		if m.left != nil {
			out[FieldLeftPrefix+string(m.From)] = string(m.left)
		}
	}
	if plan != "" {
		out[FieldPlan] = string(plan)
		out[FieldAt] = strconv.FormatInt(time.Now().UnixMilli(), 10)
	}
	return out
}

// carry reads m's old state and computes both states m writes at server
// time now: the new policy's, holding max(what the old one consumed, at
// most the new limit; what back, the new policy's state when the subject
// left it, holds now), and the old one's charged to empty.
func (s *Store) carry(ctx context.Context, tx *redis.Tx, m *move, back programs.State, now int64) error {
	raw, err := tx.Get(ctx, m.fromKey).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("GET: %w", err)
	}
	if err == nil {
		m.left = programs.State(raw)
	}
	pf, pt := s.policies[m.From], s.policies[m.To]
	m.Consumed = programs.Consumed(pf, m.left, now)
	units := min(m.Consumed, pt.Limit())
	had := programs.Consumed(pt, back, now)
	switch {
	case had > 0 && had >= units:
		// Back where it had consumed more: its state as time evolved it.
		r, _ := programs.Evaluate(pt, back, now, 1)
		if r.Status == programs.StatusAllowed || r.Status == programs.StatusDenied {
			m.toState, m.toTTL = back, r.ResetAtMillis-r.ServerNowMillis+pt.CleanupGrace().Milliseconds()
		}
	case had > 0:
		r, st := programs.Charge(pt, back, now, units-had)
		if r.Status == programs.StatusAllowed {
			m.toState, m.toTTL = st, r.ExpiryMillis(pt)
		}
	case units > 0:
		r, st := programs.Charge(pt, nil, now, units)
		if r.Status == programs.StatusAllowed {
			m.toState, m.toTTL = st, r.ExpiryMillis(pt)
		}
	}
	if m.toState == nil && units > 0 {
		return fmt.Errorf("carry %q -> %q: the model refused the carried state", m.From, m.To)
	}
	m.Carried = programs.Consumed(pt, m.toState, now)
	if r, st := programs.Charge(pf, m.left, now, pf.Limit()); r.Status == programs.StatusAllowed {
		m.fromState, m.fromTTL = st, r.ExpiryMillis(pf)
	}
	if m.toState != nil && m.toTTL <= 0 || m.fromState != nil && m.fromTTL <= 0 {
		return fmt.Errorf("carry %q -> %q: a state without a positive TTL", m.From, m.To)
	}
	return nil
}

// List calls fn with every assignment (its key, which names no subject,
// and its plan), node by node; the order is SCAN's. In Redis Cluster the
// nodes are scanned concurrently, so fn must be safe for concurrent use.
// It stops at fn's first error.
func (s *Store) List(ctx context.Context, fn func(key string, a Assignment) error) error {
	scan := func(ctx context.Context, c *redis.Client) error {
		it := c.Scan(ctx, 0, Pattern(s.keys), 200).Iterator()
		for it.Next(ctx) {
			key := it.Val()
			fields, err := c.HGetAll(ctx, key).Result()
			if err != nil {
				return fmt.Errorf("HGETALL: %w", err)
			}
			a, ok, err := assignmentOf(fields)
			if err != nil {
				return fmt.Errorf("key %s: %w", key, err)
			}
			if ok {
				if err := fn(key, a); err != nil {
					return err
				}
			}
		}
		return it.Err()
	}
	switch c := s.client.(type) {
	case *redis.ClusterClient:
		return c.ForEachMaster(ctx, scan)
	case *redis.Client:
		return scan(ctx, c)
	default:
		return fmt.Errorf("rateplan: list: client %T is not a *redis.Client or *redis.ClusterClient", s.client)
	}
}
