package programs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// dedupArgs is the dedup program's ARGV with an explicit cap.
func dedupArgs(p ratelimit.Policy, cost int64, id string, maxEntries int) []any {
	args := Args(p, cost)
	args = append(args, DedupArgs(p, ratelimit.EvaluationID(id))...)
	args[len(args)-1] = int64(maxEntries)
	return args
}

// dedupStep is what one dedup program call did on the real server: its
// reply, the server time just before and just after it (TIME in the same
// MULTI), and both hashes and the dedup hash's TTL right after it.
type dedupStep struct {
	reply         Reply
	before, after int64
	state         State
	dedup         Dedup
	dedupPTTL     int64
}

func runDedupTx(t *testing.T, ctx context.Context, c *redis.Client, prog Program, stateKey, dedupKey string, args ...any) dedupStep {
	t.Helper()
	var t1, t2 *redis.TimeCmd
	var ev *redis.Cmd
	var hs *redis.StringCmd
	var hd *redis.MapStringStringCmd
	var ttl *redis.Cmd
	_, err := c.TxPipelined(ctx, func(tx redis.Pipeliner) error {
		t1 = tx.Time(ctx)
		ev = tx.EvalSha(ctx, prog.SHA1, []string{stateKey, dedupKey}, args...)
		t2 = tx.Time(ctx)
		hs = tx.Get(ctx, stateKey)
		hd = tx.HGetAll(ctx, dedupKey)
		ttl = tx.Do(ctx, "PTTL", dedupKey) // raw: -1 no TTL, -2 absent, else ms left
		return nil
	})
	if !errors.Is(err, redis.Nil) { // an absent state key
		require.NoError(t, err)
	}
	res, err := ev.Int64Slice()
	require.NoError(t, err)
	var s dedupStep
	s.reply = toReply(t, res)
	s.before, s.after = t1.Val().UnixMilli(), t2.Val().UnixMilli()
	if v, err := hs.Result(); err == nil {
		s.state = State(v)
	} else {
		require.ErrorIs(t, err, redis.Nil)
	}
	if m := hd.Val(); len(m) > 0 {
		s.dedup = Dedup(m)
	}
	s.dedupPTTL, err = ttl.Int64()
	require.NoError(t, err)
	return s
}

// TestRedisDedupProgramsMatchModel is the dedup programs' differential test
// on the real server: per algorithm, seeded random sequences of calls with
// IDs drawn from a small pool (so repeats happen, within and after a short
// dedup window), random costs, and two policies (another ID) sharing one
// dedup hash, under a small cap so that eviction runs. Every reply, the
// stored state and the dedup hash equal the model's for the server time of
// the call (read by TIME around it in one MULTI; the model must agree for
// one instant in that range), and the dedup hash always has a TTL. The
// first policy replays an ID at most twice, the second never, so spent
// records and charged reuses occur.
func TestRedisDedupProgramsMatchModel(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client()
	const maxEntries = 4
	for name, base := range differentialPolicies(t) {
		if spec, _ := base.Algorithm().Spec(); spec.NoDedup != "" {
			continue // no dedup program (a concurrency limit's replay holds no slot)
		}
		t.Run(name, func(t *testing.T) {
			ctx := redisCtx(t)
			policies := []ratelimit.Policy{
				withDedupReplays(t, base, 30*time.Millisecond, "", 0, 2),
				withDedupReplays(t, base, 30*time.Millisecond, "other", 0, 0),
			}
			prog, ok := DedupFor(base.Algorithm())
			require.True(t, ok)
			sha, err := c.ScriptLoad(ctx, prog.Source).Result()
			require.NoError(t, err)
			require.Equal(t, prog.SHA1, sha)
			rng := rand.New(rand.NewPCG(20261203, uint64(len(name))))
			stateKeys := []string{"dd:{" + name + "}:s0", "dd:{" + name + "}:s1"}
			dedupKey := "dd:{" + name + "}:d"
			states := make([]State, 2)
			var d Dedup
			counts := map[Status]int{}
			for step := range 120 {
				if rng.IntN(6) == 0 {
					time.Sleep(time.Duration(rng.Int64N(25)) * time.Millisecond)
				}
				which := rng.IntN(4) / 3 // mostly the first policy
				p := policies[which]
				cost := 1 + rng.Int64N(min(p.MaxCost(), 2))
				id := "id-" + strconv.Itoa(rng.IntN(6))
				got := runDedupTx(t, ctx, c, prog, stateKeys[which], dedupKey, dedupArgs(p, cost, id, maxEntries)...)
				require.NoError(t, got.reply.Check(p), "step %d: %+v", step, got.reply)
				matched := false
				for now := got.before; now <= got.after && !matched; now++ {
					r, st, nd := evaluateDedup(p, states[which], d, now, cost, id, maxEntries)
					// Records expired at now may be gone on the server
					// (the whole hash expires one window after the last
					// record); only live records are compared.
					if r == got.reply && bytes.Equal(st, got.state) && equalMaps(live(nd, now), live(got.dedup, now)) {
						matched = true
						states[which], d = st, got.dedup
					}
				}
				if !matched {
					r, st, nd := evaluateDedup(p, states[which], d, got.before, cost, id, maxEntries)
					require.Failf(t, "program and model differ", "step %d policy %s cost %d %s at %d..%d:\nlua   %+v %v %v\nmodel %+v %v %v",
						step, p.ID(), cost, id, got.before, got.after, got.reply, got.state, got.dedup, r, st, nd)
				}
				require.LessOrEqual(t, len(got.dedup), maxEntries)
				if len(got.dedup) > 0 {
					// 0 when less than 1 ms is left (the newest record expires now).
					require.GreaterOrEqual(t, got.dedupPTTL, int64(0), "the dedup hash has a TTL")
					require.LessOrEqual(t, got.dedupPTTL, int64(30))
				}
				counts[got.reply.Status]++
			}
			assert.Positive(t, counts[StatusAllowed], "%v", counts)
			t.Logf("statuses: %v", counts)
			// Replays, conflict and a spent record for certain, whatever
			// the machine's speed: calls back to back in one MULTI on
			// fresh keys (the first policy replays twice).
			fresh, freshDedup := "dd:{"+name+"}:fresh", "dd:{"+name+"}:fresh-d"
			var evs [5]*redis.Cmd
			var rec *redis.StringCmd
			_, err = c.TxPipelined(ctx, func(tx redis.Pipeliner) error {
				evs[0] = tx.EvalSha(ctx, prog.SHA1, []string{fresh, freshDedup}, dedupArgs(policies[0], 1, "x", maxEntries)...)
				evs[1] = tx.EvalSha(ctx, prog.SHA1, []string{fresh, freshDedup}, dedupArgs(policies[0], 1, "x", maxEntries)...)
				evs[2] = tx.EvalSha(ctx, prog.SHA1, []string{fresh, freshDedup}, dedupArgs(policies[1], 1, "x", maxEntries)...)
				evs[3] = tx.EvalSha(ctx, prog.SHA1, []string{fresh, freshDedup}, dedupArgs(policies[0], 1, "x", maxEntries)...)
				evs[4] = tx.EvalSha(ctx, prog.SHA1, []string{fresh, freshDedup}, dedupArgs(policies[0], 1, "x", maxEntries)...)
				rec = tx.HGet(ctx, freshDedup, "x")
				return nil
			})
			require.NoError(t, err)
			var st [5]Reply
			for i, ev := range evs {
				v, err := ev.Int64Slice()
				require.NoError(t, err)
				st[i] = toReply(t, v)
			}
			require.Equal(t, StatusAllowed, st[0].Status)
			want := st[0]
			want.Status = StatusReplayed
			require.Equal(t, want, st[1])
			require.Equal(t, StatusDedupConflict, st[2].Status)
			require.Equal(t, want, st[3])
			require.Contains(t, []Status{StatusAllowed, StatusDenied}, st[4].Status, "spent: decided like a request without an ID")
			r, ok := parseDedupRecord(rec.Val())
			require.True(t, ok, rec.Val())
			require.Equal(t, int64(2), r.replays, "two replays counted, the charged reuse left the record")
			require.Equal(t, st[0].ServerNowMillis, r.serverNow)
		})
	}
}

// live is d without the records expired at now.
func live(d Dedup, now int64) Dedup {
	out := Dedup{}
	for k, v := range d {
		if e, ok := recordExpiry(v); !ok || e > now {
			out[k] = v
		}
	}
	return out
}

func equalMaps[M ~map[string]string](a, b M) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestRedisDedupRefusals: a dedup key of another type and a malformed
// record are STATE_INCOMPATIBLE, bad dedup arguments INVALID, and none of
// them writes anything; the decision program's state is untouched.
func TestRedisDedupRefusals(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client()
	ctx := redisCtx(t)
	p := withDedup(t, smallPolicy(t, ratelimit.AlgorithmTokenBucket, time.Second), time.Minute, "", 0)
	prog, ok := DedupFor(p.Algorithm())
	require.True(t, ok)
	sk, dk := "ref:{s}:state", "ref:{s}:dedup"
	run := func(args ...any) Reply {
		v, err := evalInts(ctx, c, prog.Source, []string{sk, dk}, args...)
		require.NoError(t, err)
		return toReply(t, v)
	}
	require.NoError(t, c.Set(ctx, dk, "x", 0).Err())
	assert.Equal(t, StatusStateIncompatible, run(dedupArgs(p, 1, "id", 4)...).Status)
	require.NoError(t, c.Del(ctx, dk).Err())
	require.NoError(t, c.HSet(ctx, dk, "id", "not a record").Err())
	assert.Equal(t, StatusStateIncompatible, run(dedupArgs(p, 1, "id", 4)...).Status)
	withReplays := func(n any) []any {
		args := dedupArgs(p, 1, "id", 4)
		args[len(args)-1-(ArgCountDedup-1-ArgDedupMaxReplays)] = n
		return args
	}
	for _, args := range [][]any{
		withReplays(int64(17)),
		withReplays("-1"),
		withReplays("01"),
		withReplays(""),
		dedupArgs(p, 1, "a b", 4),
		dedupArgs(p, 1, "", 4),
		dedupArgs(p, 1, "id", 0),
		dedupArgs(p, 1, "id", 1025),
		append(Args(p, 1), "id", "api", int64(0), int64(1), int64(4)),
		append(Args(p, 1), "id", "API", int64(1000), int64(1), int64(4)),
		append(Args(p, 1), "id", "api", int64(86400001), int64(1), int64(4)),
		append(Args(p, 1), "id", "api", int64(1000), int64(4)),
		Args(p, 1),
	} {
		assert.Equal(t, StatusInvalid, run(args...).Status, "%v", args)
	}
	n, err := c.Exists(ctx, sk).Result()
	require.NoError(t, err)
	assert.Zero(t, n, "nothing written")
	m, err := c.HGetAll(ctx, dk).Result()
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"id": "not a record"}, m)
}

// TestRedisDedupFootprint measures a full dedup hash (DedupMaxEntries
// records of edge-sized IDs, each replayed the most a policy allows, so
// every replay count has two digits) with MEMORY USAGE: the per-subject
// bound docs/degraded-mode.md states.
func TestRedisDedupFootprint(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client()
	ctx := redisCtx(t)
	p := withDedupReplays(t, mustPolicy(t, ratelimit.AlgorithmTokenBucket, ratelimit.TokenBucket{Capacity: 1000, RefillTokens: 100, RefillPeriod: time.Second}, 10, time.Minute, 2*time.Second), 10*time.Minute, "api-default.v1", 0, ratelimit.MaxDedupMaxReplays)
	prog, ok := DedupFor(p.Algorithm())
	require.True(t, ok)
	sk, dk := "fp:{s}:state", "fp:{s}:dedup"
	for i := range DedupMaxEntries + 5 {
		id := fmt.Sprintf("%043d", i) // an edge ID is 43 base64url characters
		v, err := evalInts(ctx, c, prog.Source, []string{sk, dk}, append(Args(p, 1), DedupArgs(p, ratelimit.EvaluationID(id))...)...)
		require.NoError(t, err)
		require.Equal(t, StatusAllowed, toReply(t, v).Status)
	}
	require.NoError(t, c.ScriptLoad(ctx, prog.Source).Err())
	for i := 5; i < DedupMaxEntries+5; i++ {
		id := fmt.Sprintf("%043d", i)
		cmds, err := c.Pipelined(ctx, func(pl redis.Pipeliner) error {
			for range ratelimit.MaxDedupMaxReplays {
				pl.EvalSha(ctx, prog.SHA1, []string{sk, dk}, append(Args(p, 1), DedupArgs(p, ratelimit.EvaluationID(id))...)...)
			}
			return nil
		})
		require.NoError(t, err)
		for _, cmd := range cmds {
			v, err := cmd.(*redis.Cmd).Int64Slice()
			require.NoError(t, err)
			require.Equal(t, StatusReplayed, toReply(t, v).Status)
		}
	}
	n, err := c.HLen(ctx, dk).Result()
	require.NoError(t, err)
	require.Equal(t, int64(DedupMaxEntries), n, "capped")
	rec, err := c.HGet(ctx, dk, fmt.Sprintf("%043d", 5)).Result()
	require.NoError(t, err)
	require.True(t, strings.HasSuffix(rec, " 16"), rec)
	bytes, err := c.MemoryUsage(ctx, dk, 0).Result()
	require.NoError(t, err)
	t.Logf("dedup hash: %d records, MEMORY USAGE %d bytes (%d per record)", n, bytes, bytes/n)
	require.Less(t, bytes, int64(DedupMaxEntries*256), "docs/degraded-mode.md bounds a record at 256 bytes")
}
