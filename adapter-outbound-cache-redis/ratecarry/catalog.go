package ratecarry

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redisrate"
	"github.com/tech-log/tech-log-backend/shared-contract/keyspace"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// Key segments of the catalog: <prefix>:rate:catalog:catalog:v2:<digest>,
// one hash for the keyspace, field "<policy ID>@<revision>" per revision
// an instance has served, value {"at": ms, "policy": ratelimit.MarshalPolicy}.
const (
	KeyRegionCatalog = "catalog"
	KeyKindCatalog   = "catalog"
	// keptRevisions is how many revisions of one policy the catalog keeps
	// (the newest by when they were last recorded).
	keptRevisions = 3
)

// Catalog is the record, on the coordination server, of the policy
// revisions instances have served: a process started on a new revision
// finds there the revision its subjects' states were spent under
// (Predecessors). Safe for concurrent use.
type Catalog struct {
	client redis.UniversalClient
	key    string
	now    func() time.Time
}

// NewCatalog returns the catalog of keys' keyspace through client.
func NewCatalog(client redis.UniversalClient, keys *keyspace.Builder) (*Catalog, error) {
	if client == nil || keys == nil {
		return nil, errors.New("ratecarry: catalog: client and keys are required")
	}
	key, err := keys.Key(redisrate.KeyCapability, KeyRegionCatalog, KeyKindCatalog, "v1")
	if err != nil {
		return nil, fmt.Errorf("ratecarry: catalog key: %w", err)
	}
	return &Catalog{client: client, key: key, now: time.Now}, nil
}

// entry is one recorded revision.
type entry struct {
	At     int64           `json:"at"`
	Policy json.RawMessage `json:"policy"`
}

// Record records policies as served now, then drops all but the newest
// keptRevisions of each policy.
func (c *Catalog) Record(ctx context.Context, policies []ratelimit.Policy) error {
	at := c.now().UnixMilli()
	fields := make(map[string]any, len(policies))
	for _, p := range policies {
		raw, err := ratelimit.MarshalPolicy(p)
		if err != nil {
			return err
		}
		v, err := json.Marshal(entry{At: at, Policy: raw})
		if err != nil {
			return err
		}
		fields[field(p.ID(), p.Revision())] = string(v)
	}
	if len(fields) == 0 {
		return nil
	}
	if err := c.client.HSet(ctx, c.key, fields).Err(); err != nil {
		return fmt.Errorf("ratecarry: catalog: HSET: %w", err)
	}
	all, err := c.read(ctx)
	if err != nil {
		return err
	}
	var drop []string
	for _, revs := range all {
		slices.SortFunc(revs, func(a, b revision) int { return cmp.Compare(b.at, a.at) })
		for _, r := range revs[min(len(revs), keptRevisions):] {
			drop = append(drop, r.field)
		}
	}
	if len(drop) > 0 {
		if err := c.client.HDel(ctx, c.key, drop...).Err(); err != nil {
			return fmt.Errorf("ratecarry: catalog: HDEL: %w", err)
		}
	}
	return nil
}

// Predecessors maps each of policies to the revision of its ID the
// catalog recorded last, other than its own; a policy the catalog has no
// other revision of is not in it.
func (c *Catalog) Predecessors(ctx context.Context, policies []ratelimit.Policy) (map[ratelimit.PolicyID]ratelimit.Policy, error) {
	all, err := c.read(ctx)
	if err != nil {
		return nil, err
	}
	out := map[ratelimit.PolicyID]ratelimit.Policy{}
	for _, p := range policies {
		var best *revision
		for i, r := range all[p.ID()] {
			if r.rev != p.Revision() && (best == nil || r.at > best.at) {
				best = &all[p.ID()][i]
			}
		}
		if best == nil {
			continue
		}
		q, err := ratelimit.UnmarshalPolicy(best.policy)
		if err != nil || q.ID() != p.ID() {
			continue // an entry this version cannot read: nothing carried
		}
		out[p.ID()] = q
	}
	return out, nil
}

// revision is one parsed catalog field.
type revision struct {
	field  string
	rev    int64
	at     int64
	policy json.RawMessage
}

// read is the catalog by policy ID; unreadable fields are skipped.
func (c *Catalog) read(ctx context.Context) (map[ratelimit.PolicyID][]revision, error) {
	fields, err := c.client.HGetAll(ctx, c.key).Result()
	if err != nil {
		return nil, fmt.Errorf("ratecarry: catalog: HGETALL: %w", err)
	}
	out := map[ratelimit.PolicyID][]revision{}
	for f, v := range fields {
		id, revText, ok := strings.Cut(f, "@")
		rev, err := strconv.ParseInt(revText, 10, 64)
		var e entry
		if !ok || err != nil || json.Unmarshal([]byte(v), &e) != nil {
			continue
		}
		out[ratelimit.PolicyID(id)] = append(out[ratelimit.PolicyID(id)], revision{field: f, rev: rev, at: e.At, policy: e.Policy})
	}
	return out, nil
}

func field(id ratelimit.PolicyID, rev int64) string {
	return string(id) + "@" + strconv.FormatInt(rev, 10)
}
