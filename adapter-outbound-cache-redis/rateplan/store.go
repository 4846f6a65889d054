package rateplan

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

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
