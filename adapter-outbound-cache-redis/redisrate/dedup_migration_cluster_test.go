package redisrate

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redisinfo"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest/redisserver"
	"github.com/tech-log/tech-log-backend/shared-contract/keyspace"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// refusal names the cluster refusals refusalHook counts.
type refusal string

const (
	refusalAsk         refusal = "ASK"
	refusalMoved       refusal = "MOVED"
	refusalTryAgain    refusal = "TRYAGAIN"
	refusalClusterDown refusal = "CLUSTERDOWN"
)

// refusalHook is a go-redis hook on every node client of a provider: it
// counts the refusals of program calls (EVALSHA, EVAL) the nodes answer,
// and on a TRYAGAIN or CLUSTERDOWN runs the test's next migration step
// (once), after the reply came and before the send loop reads it. So the
// loop's retry meets the state the test drove, not a state a pause hoped
// for.
type refusalHook struct {
	mu     sync.Mutex
	counts map[refusal]int
	// on is run once per refusal kind when set; its error is kept for the
	// test goroutine (a hook runs on the provider's goroutine).
	on   map[refusal]func() error
	ran  map[refusal]int
	errs []error
}

func newRefusalHook() *refusalHook {
	return &refusalHook{counts: map[refusal]int{}, on: map[refusal]func() error{}, ran: map[refusal]int{}}
}

func (h *refusalHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *refusalHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		// This go-redis sets cmd's error from what the chain returns,
		// after the hooks.
		h.saw(cmd, err)
		return err
	}
}

func (h *refusalHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, c := range cmds {
			h.saw(c, c.Err())
		}
		return err
	}
}

// saw counts cmd's refusal (err), if any, and runs its step. The lock is held
// while the step runs: a concurrent call's refusal waits for it, so it too
// is retried against the new state.
func (h *refusalHook) saw(cmd redis.Cmder, err error) {
	if n := cmd.Name(); n != "evalsha" && n != "eval" {
		return
	}
	var r refusal
	if _, ok := redis.IsAskError(err); ok {
		r = refusalAsk
	} else if _, ok := redis.IsMovedError(err); ok {
		r = refusalMoved
	} else if redis.IsTryAgainError(err) {
		r = refusalTryAgain
	} else if redis.IsClusterDownError(err) {
		r = refusalClusterDown
	} else {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.counts[r]++
	if f := h.on[r]; f != nil {
		delete(h.on, r)
		h.ran[r]++
		if err := f(); err != nil {
			h.errs = append(h.errs, fmt.Errorf("step on %s: %w", r, err))
		}
	}
}

// arm sets the step run on the next refusal r.
func (h *refusalHook) arm(r refusal, f func() error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.on[r] = f
}

// snapshot returns the counts so far, how often each step ran, and the
// steps' errors.
func (h *refusalHook) snapshot() (counts, ran map[refusal]int, errs []error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	counts, ran = map[refusal]int{}, map[refusal]int{}
	for k, v := range h.counts {
		counts[k] = v
	}
	for k, v := range h.ran {
		ran[k] = v
	}
	return counts, ran, slices.Clone(h.errs)
}

// hookedClusterProvider is clusterProvider with h on every node client the
// provider's router creates.
func hookedClusterProvider(t *testing.T, addrs []string, keys *keyspace.Builder, policies []ratelimit.Policy, h *refusalHook) *Provider {
	t.Helper()
	cfg := clusterConfig()
	// Every call decided by its reply even on a loaded machine: the exact
	// counts below allow no timeout.
	cfg.CommandTimeout, cfg.PoolTimeout = 10*time.Second, 10*time.Second
	cc, err := NewClusterClient(cfg, addrs)
	require.NoError(t, err)
	o := cc.Options()
	newClient := o.NewClient
	o.NewClient = func(no *redis.Options) *redis.Client {
		c := newClient(no)
		c.AddHook(h)
		return c
	}
	p, err := New(cc, keys, policies, Options{CommandTimeout: cfg.CommandTimeout, MaxInFlight: cfg.PoolSize})
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, p.Start(ctx))
	return p
}

// clusterState polls s's CLUSTER INFO (read with redisinfo) until its
// cluster_state is want ("ok" or "fail"), for at most 10 s.
func clusterState(ctx context.Context, s *redistest.Server, want string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return redisserver.Poll(ctx, 20*time.Millisecond, func() error {
		text, err := s.Client().ClusterInfo(ctx).Result()
		if err != nil {
			return err
		}
		info, err := redisinfo.ParseClusterInfo(text)
		if err != nil {
			return err
		}
		if info.State != want {
			return fmt.Errorf("node %s: cluster_state %s, want %s", s.Addr(), info.State, want)
		}
		return nil
	})
}

// TestClusterDedupSlotMigration moves the slot of a dedup subject (its
// state key and its dedup hash: two keys in one slot) from primary A to
// primary B while calls run, driving every step itself: MIGRATING and
// IMPORTING with both keys on A (A serves), the state key MIGRATEd alone
// (the half-migrated slot: a multi-key call finding one key of two answers
// TRYAGAIN, on A, or on B after ASK and ASKING, as the server version
// decides; the first TRYAGAIN MIGRATEs the dedup hash, and the loop's
// retry is sent to A, answered ASK, and served by B), both keys on B
// (ASK), SETSLOT NODE (MOVED),
// then the cluster losing another slot (CLUSTERDOWN; the hook gives the
// slot back and the retry decides). Each step runs 2 new evaluation IDs
// and 2 replays of the previous step's at once. Every call is Evaluated;
// the new IDs are admitted exactly while the capacity (10) lasts, each
// token once (the Remaining values are 9..0, each once), the two beyond it
// denied; every replay is answered Replayed with its admission's decision;
// TRYAGAIN, ASK, MOVED and CLUSTERDOWN were each met and followed; and the
// program calls that ran over every node equal the evaluations.
func TestClusterDedupSlotMigration(t *testing.T) {
	c := redistest.StartCluster(t)
	keys := randomKeys(t)
	const capacity = 10
	// A token bucket refilling 1 per hour: no window boundary can give a
	// token back during the test.
	pol := mustPolicy(t, ratelimit.PolicySpec{ID: "c-dedup-move", Params: ratelimit.TokenBucket{Capacity: capacity, RefillTokens: 1, RefillPeriod: time.Hour}, DedupWindow: time.Hour})
	h := newRefusalHook()
	p := hookedClusterProvider(t, c.Addrs(), keys, []ratelimit.Policy{pol}, h)
	ctx := redistest.AdminCtx(t)

	s := randomSubject(t)
	sk, err := StateKey(keys, pol, s)
	require.NoError(t, err)
	dk, err := DedupKey(keys, s)
	require.NoError(t, err)
	slot := keySlot(sk)
	require.Equal(t, slot, keySlot(dk), "the state and the dedup hash share a slot")
	a := c.SlotOwner(slot)
	var b *redistest.Server
	for _, n := range c.Primaries() {
		if n != a {
			b = n
			break
		}
	}
	require.NotNil(t, b)
	bHost, bPort, err := net.SplitHostPort(b.Addr())
	require.NoError(t, err)
	migrate := func(key string) error {
		return a.Client().Do(ctx, "migrate", bHost, bPort, key, 0, 5000).Err()
	}

	// The outcome of every call, by evaluation ID.
	admitted := map[string]ratelimit.Decision{} // new IDs admitted
	var remainings []int64
	denied := 0
	next := 0
	call := func(id string) ratelimit.Outcome {
		return p.Evaluate(context.Background(), ratelimit.Request{PolicyID: pol.ID(), SubjectDigest: s, Cost: 1, EvaluationID: ratelimit.EvaluationID(id), Deadline: time.Now().Add(30 * time.Second)})
	}
	// step runs 2 new IDs and the replays of replay at once and checks each
	// outcome; it returns the new IDs.
	step := func(name string, replay []string) []string {
		t.Helper()
		fresh := []string{fmt.Sprintf("id-%d", next), fmt.Sprintf("id-%d", next+1)}
		next += 2
		ids := append(slices.Clone(fresh), replay...)
		outs := make([]ratelimit.Outcome, len(ids))
		var wg sync.WaitGroup
		for i, id := range ids {
			wg.Add(1)
			go func() {
				defer wg.Done()
				outs[i] = call(id)
			}()
		}
		wg.Wait()
		for i, id := range ids {
			e, ok := outs[i].(ratelimit.Evaluated)
			require.Truef(t, ok, "%s: %s: %v (cause %v): every call is decided", name, id, outs[i], causeOf(outs[i]))
			d := e.Decision
			if i < len(fresh) {
				require.Falsef(t, d.Replayed, "%s: %s is new", name, id)
				if d.Allowed {
					admitted[id] = d
					remainings = append(remainings, d.Remaining)
				} else {
					denied++
				}
				continue
			}
			orig, ok := admitted[id]
			require.Truef(t, ok, "%s: replayed %s was admitted before", name, id)
			assert.Truef(t, d.Replayed && d.Allowed, "%s: %s answered as a replay: %+v", name, id, d)
			assert.Equalf(t, orig.Remaining, d.Remaining, "%s: %s replays its admission's decision", name, id)
		}
		counts, _, errs := h.snapshot()
		require.Emptyf(t, errs, "%s: the hook's steps", name)
		t.Logf("%s: refusals so far %v", name, counts)
		var kept []string
		for _, id := range fresh {
			if _, ok := admitted[id]; ok {
				kept = append(kept, id)
			}
		}
		return kept
	}
	refusals := func() map[refusal]int { counts, _, _ := h.snapshot(); return counts }

	// 0. Both keys on A, no migration.
	c.ResetStats()
	prev := step("stable", nil)
	require.Len(t, prev, 2)
	assert.Empty(t, refusals(), "no refusal while A owns the slot")

	// 1. MIGRATING on A, IMPORTING on B (B first, the documented order);
	// both keys still on A, which serves them.
	require.NoError(t, b.Client().Do(ctx, "cluster", "setslot", slot, "importing", c.ID(a)).Err())
	require.NoError(t, a.Client().Do(ctx, "cluster", "setslot", slot, "migrating", c.ID(b)).Err())
	prev = step("migrating, both keys on A", prev)
	assert.Empty(t, refusals(), "A holds every key of the call: it runs it")

	// 2. The state key MIGRATEd alone: the slot is half-migrated. The first
	// TRYAGAIN MIGRATEs the dedup hash before the loop retries.
	require.NoError(t, migrate(sk))
	h.arm(refusalTryAgain, func() error { return migrate(dk) })
	before := refusals()
	prev = step("half-migrated", prev)
	after := refusals()
	_, ran, _ := h.snapshot()
	assert.Equal(t, 1, ran[refusalTryAgain], "the dedup hash moved on the first TRYAGAIN")
	assert.Greater(t, after[refusalTryAgain], before[refusalTryAgain], "a call met TRYAGAIN (one key of two on B) and was retried")
	n, err := b.Client().ClusterCountKeysInSlot(ctx, slot).Result()
	require.NoError(t, err)
	assert.EqualValues(t, 2, n, "both keys on B")
	n, err = a.Client().ClusterCountKeysInSlot(ctx, slot).Result()
	require.NoError(t, err)
	assert.Zero(t, n, "none left on A")

	// 3. Both keys on B, the slot still MIGRATING/IMPORTING: A answers ASK.
	before = refusals()
	prev = step("both keys on B", prev)
	assert.Greater(t, refusals()[refusalAsk], before[refusalAsk], "ASK followed to B")

	// 4. SETSLOT NODE B: B first, then A, then the others. The provider's
	// map still names A: MOVED.
	c.SetSlotNode(slot, b, a)
	before = refusals()
	prev = step("slot on B", prev)
	assert.Greater(t, refusals()[refusalMoved], before[refusalMoved], "MOVED followed to B")

	// 5. The cluster loses another slot (every node forgets it): B answers
	// CLUSTERDOWN. The first CLUSTERDOWN gives the slot back to its owner
	// (ADDSLOTS there, SETSLOT NODE on the other primaries) and waits for B
	// to be ok again before the loop retries.
	other := (slot + 1) % redistest.ClusterSlots
	owner := c.SlotOwner(other)
	for _, n := range c.Nodes() {
		require.NoError(t, n.Client().Do(ctx, "cluster", "delslots", other).Err())
	}
	require.NoError(t, clusterState(ctx, b, "fail"))
	h.arm(refusalClusterDown, func() error {
		if err := owner.Client().Do(ctx, "cluster", "addslots", other).Err(); err != nil {
			return err
		}
		for _, n := range c.Primaries() {
			if n == owner {
				continue
			}
			if err := n.Client().Do(ctx, "cluster", "setslot", other, "node", c.ID(owner)).Err(); err != nil {
				return err
			}
		}
		return clusterState(ctx, b, "ok")
	})
	before = refusals()
	prev = step("cluster down", prev)
	_, ran, _ = h.snapshot()
	assert.Equal(t, 1, ran[refusalClusterDown], "the slot came back on the first CLUSTERDOWN")
	assert.Greater(t, refusals()[refusalClusterDown], before[refusalClusterDown], "a call met CLUSTERDOWN and was retried")
	assert.Empty(t, prev, "the capacity was spent before step 5's new IDs")

	// Exactly the capacity admitted, each token once; the rest denied.
	assert.Len(t, admitted, capacity, "new IDs admitted = capacity")
	assert.Equal(t, 2*6-capacity, denied, "new IDs beyond the capacity denied")
	slices.Sort(remainings)
	want := make([]int64, capacity)
	for i := range want {
		want[i] = int64(i)
	}
	assert.Equal(t, want, remainings, "each token consumed once: no charge lost or doubled")
	e, ok := call("id-final").(ratelimit.Evaluated)
	require.True(t, ok)
	assert.False(t, e.Decision.Allowed, "nothing left")
	assert.Zero(t, e.Decision.Remaining)
	// Every refusal was answered before anything ran: the program calls
	// that ran over every node are the evaluations, none twice.
	assert.EqualValues(t, 2+5*4+1, programCalls(c), "program calls that ran = evaluations")
	c.WaitHealthy()
}
