package programs

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// TestRedisTypeNormalization: a hash (the schema 1 state), list, set, zset
// or stream at the key (TYPE other than string; GET answers WRONGTYPE) is
// STATE_INCOMPATIBLE, and the value and its expiry are unchanged.
func TestRedisTypeNormalization(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client()
	ctx := redisCtx(t)
	for _, a := range algorithms {
		p, prog := smallPolicy(t, a, time.Second), mustProgram(t, a)
		for kind, put := range wrongTypes() {
			key := a.String() + ":" + kind
			require.NoError(t, put(c, key))
			typ, err := c.Type(ctx, key).Result()
			require.NoError(t, err)
			require.Equal(t, kind, typ)
			before := snap(t, ctx, c, key)
			v, err := runRedis(ctx, c, prog, key, Args(p, 1)...)
			require.NoError(t, err, key)
			r := toReply(t, v)
			require.Equal(t, StatusStateIncompatible, r.Status, key)
			require.NoError(t, r.Check(p))
			require.Equal(t, before, snap(t, ctx, c, key), key)
			require.Equal(t, int64(-1), before.expireAt, "%s: still no TTL", key)
		}
	}
}

// TestRedisMalformedStateIsIncompatible: every malformed value (wrong
// length, schema, algorithm or revision, values out of range or
// inconsistent) is STATE_INCOMPATIBLE on the real server, with Redis's own
// struct library, and nothing is written; the valid state is accepted.
func TestRedisMalformedStateIsIncompatible(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client()
	ctx := redisCtx(t)
	for _, a := range algorithms {
		t.Run(a.String(), func(t *testing.T) {
			p, prog := smallPolicy(t, a, time.Second), mustProgram(t, a)
			key := "malformed:" + a.String()
			v, err := runRedis(ctx, c, prog, key, Args(p, 2)...)
			require.NoError(t, err)
			require.Equal(t, StatusAllowed, toReply(t, v).Status)
			valid := getState(t, c, key)
			for name, st := range malformedStates(p, valid) {
				seedState(t, ctx, c, key, st)
				before := snap(t, ctx, c, key)
				v, err := runRedis(ctx, c, prog, key, Args(p, 1)...)
				require.NoError(t, err, name)
				r := toReply(t, v)
				require.Equal(t, Reply{Status: StatusStateIncompatible, ServerNowMillis: r.ServerNowMillis}, r, name)
				require.Equal(t, before, snap(t, ctx, c, key), "%s: nothing written", name)
			}
			seedState(t, ctx, c, key, valid)
			v, err = runRedis(ctx, c, prog, key, Args(p, 1)...)
			require.NoError(t, err)
			require.Equal(t, StatusAllowed, toReply(t, v).Status, "the valid state itself is accepted")
		})
	}
}

// requireRefusedUnwritten runs prog with every ARGV of bad on the fresh
// key (absent) and the existing one (holding state) and requires each
// call to answer INVALID with the server time, create no key and leave
// the existing state byte for byte as it was.
func requireRefusedUnwritten(t *testing.T, ctx context.Context, c *redis.Client, prog Program, fresh, existing string, bad map[string][]any) {
	t.Helper()
	before := snap(t, ctx, c, existing)
	for name, args := range bad {
		for _, key := range []string{fresh, existing} {
			v, err := runRedis(ctx, c, prog, key, args...)
			require.NoError(t, err, name)
			r := toReply(t, v)
			require.Equal(t, Reply{Status: StatusInvalid, ServerNowMillis: r.ServerNowMillis}, r, name)
			require.Positive(t, r.ServerNowMillis)
		}
		n, err := c.Exists(ctx, fresh).Result()
		require.NoError(t, err)
		require.Zero(t, n, "%s: no key created", name)
		require.Equal(t, before, snap(t, ctx, c, existing), "%s: state untouched", name)
	}
}

// TestRedisInvalidArgs: ARGV sent directly (not through Args) that is
// malformed or out of range is INVALID; no key is created and existing state
// is untouched.
func TestRedisInvalidArgs(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client()
	ctx := redisCtx(t)
	for _, a := range algorithms {
		t.Run(a.String(), func(t *testing.T) {
			p, prog := smallPolicy(t, a, time.Second), mustProgram(t, a)
			fresh, existing := "invalid:fresh:"+a.String(), "invalid:existing:"+a.String()
			v, err := runRedis(ctx, c, prog, existing, Args(p, 1)...)
			require.NoError(t, err)
			require.Equal(t, StatusAllowed, toReply(t, v).Status)
			before := snap(t, ctx, c, existing)
			requireRefusedUnwritten(t, ctx, c, prog, fresh, existing, invalidArgs(a, Args(p, 1)))
			for _, keys := range [][]string{{}, {fresh, existing}} {
				v, err := evalInts(ctx, c, prog.Source, keys, Args(p, 1)...)
				require.NoError(t, err)
				require.Equal(t, int64(StatusInvalid), v[0], "%d keys", len(keys))
			}
			require.Equal(t, before, snap(t, ctx, c, existing))
		})
	}
}

// TestRedisShebangRefusesOOMBeforeRunning: with `maxmemory 1` and
// noeviction, the server refuses the program before it runs (the error has
// no "script:" part, so no line of it ran) and the key is unchanged. Without
// the shebang the same body does run and fails at its first write, which is
// why the programs declare it.
func TestRedisShebangRefusesOOMBeforeRunning(t *testing.T) {
	srv := redistest.Start(t, redistest.WithConfig("maxmemory-policy", "noeviction"))
	c := srv.Client()
	ctx := redisCtx(t)
	for _, a := range algorithms {
		t.Run(a.String(), func(t *testing.T) {
			p, prog := smallPolicy(t, a, time.Second), mustProgram(t, a)
			key := "oom:" + a.String()
			v, err := runRedis(ctx, c, prog, key, Args(p, 1)...)
			require.NoError(t, err)
			require.Equal(t, StatusAllowed, toReply(t, v).Status)
			before := snap(t, ctx, c, key)

			require.NoError(t, c.ConfigSet(ctx, "maxmemory", "1").Err())
			_, err = runRedis(ctx, c, prog, key, Args(p, 1)...)
			shebangErr := err
			_, evalshaErr := c.EvalSha(ctx, prog.SHA1, []string{key}, Args(p, 1)...).Result()
			_, plainErr := evalInts(ctx, c, luaBody(t, prog.Source), []string{key}, Args(p, 1)...)
			require.NoError(t, c.ConfigSet(ctx, "maxmemory", "0").Err())

			for _, err := range []error{shebangErr, evalshaErr} {
				require.Error(t, err)
				require.True(t, strings.HasPrefix(err.Error(), "OOM "), "%v", err)
				require.NotContains(t, err.Error(), "script:", "refused before the script ran")
			}
			require.Error(t, plainErr)
			require.True(t, strings.HasPrefix(plainErr.Error(), "OOM "), "%v", plainErr)
			require.Contains(t, plainErr.Error(), "script:", "without the shebang the script runs up to its first write")
			require.Equal(t, before, snap(t, ctx, c, key), "nothing written")

			v, err = runRedis(ctx, c, prog, key, Args(p, 1)...)
			require.NoError(t, err)
			require.Equal(t, StatusAllowed, toReply(t, v).Status, "served again once memory is available")
		})
	}
}

// TestRedisShebangRefusesReadOnlyReplica: on a read-only replica (of a
// second private server) the program is refused with READONLY before it
// runs, and the replica's copy of the key is unchanged.
func TestRedisShebangRefusesReadOnlyReplica(t *testing.T) {
	primary := redistest.Start(t, redistest.WithConfig("repl-diskless-sync-delay", "0"))
	replica := redistest.Start(t, redistest.WithConfig("replica-read-only", "yes"))
	replica.Require(t, redistest.CapReplicate) // the test waits for the initial sync
	ctx := redisCtx(t)
	// A TTL that outlives the initial sync.
	p := mustPolicy(t, ratelimit.AlgorithmTokenBucket, ratelimit.TokenBucket{Capacity: 5, RefillTokens: 1, RefillPeriod: time.Second}, 5, time.Hour, time.Second)
	prog := mustProgram(t, ratelimit.AlgorithmTokenBucket)
	key := "readonly"
	v, err := runRedis(ctx, primary.Client(), prog, key, Args(p, 1)...)
	require.NoError(t, err)
	require.Equal(t, StatusAllowed, toReply(t, v).Status)

	host, port, ok := strings.Cut(primary.Addr(), ":")
	require.True(t, ok)
	rc := replica.Client()
	require.NoError(t, rc.Do(ctx, "REPLICAOF", host, port).Err())
	t.Cleanup(func() { _ = rc.Do(context.Background(), "REPLICAOF", "NO", "ONE").Err() })
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := rc.Exists(ctx, key).Result()
		require.NoError(t, err)
		if n == 1 {
			break
		}
		require.True(t, time.Now().Before(deadline), "replica did not sync")
		time.Sleep(20 * time.Millisecond)
	}
	before := snap(t, ctx, rc, key)
	_, err = runRedis(ctx, rc, prog, key, Args(p, 1)...)
	require.Error(t, err)
	require.True(t, strings.HasPrefix(err.Error(), "READONLY "), "%v", err)
	require.NotContains(t, err.Error(), "script:")
	require.Equal(t, before, snap(t, ctx, rc, key))
}

// TestRedisManifestSHA1: SCRIPT LOAD of each embedded source returns the
// manifest SHA1, and EVALSHA of it runs the program.
func TestRedisManifestSHA1(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client()
	ctx := redisCtx(t)
	for _, prog := range All() {
		sha, err := c.ScriptLoad(ctx, prog.Source).Result()
		require.NoError(t, err)
		require.Equal(t, prog.SHA1, sha, prog.Name)
		p := smallPolicy(t, prog.Algorithm, time.Second)
		res, err := c.EvalSha(ctx, sha, []string{"sha:" + prog.Name}, Args(p, 1)...).Int64Slice()
		require.NoError(t, err)
		require.Equal(t, StatusAllowed, toReply(t, res).Status)
	}
}

// TestRedisStateFootprint: a subject's state is one embedded string (embstr:
// one allocation with the object) of the encoded length. It logs MEMORY
// USAGE for a key of the production shape (ADR 0010 records the numbers);
// the size target is tracked there, not asserted.
func TestRedisStateFootprint(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client()
	ctx := redisCtx(t)
	// tlb:rate:<policy>:s2:{<3-char slot tag>}<22-char base64url HMAC>
	key := "tlb:rate:api.default:s2:{AAA}" + strings.Repeat("A", 22)
	usages := map[ratelimit.Algorithm]int64{}
	for _, a := range algorithms {
		p, prog := smallPolicy(t, a, time.Second), mustProgram(t, a)
		k := key + strconv.Itoa(int(a))
		v, err := runRedis(ctx, c, prog, k, Args(p, 1)...)
		require.NoError(t, err)
		require.Equal(t, StatusAllowed, toReply(t, v).Status)
		enc, err := c.ObjectEncoding(ctx, k).Result()
		require.NoError(t, err)
		require.Equal(t, "embstr", enc)
		n, err := c.StrLen(ctx, k).Result()
		require.NoError(t, err)
		want := FixedStateBytes(a) + len(strconv.FormatInt(p.Revision(), 10))
		switch {
		case a == ratelimit.AlgorithmSlidingLog || a == ratelimit.AlgorithmConcurrency:
			want += LogEntryBytes // one admission, one entry
		case compactArrival(a):
			want -= maxArrivalWidth - minArrivalWidth // ADR 0029: this d fits 4 bytes
		}
		require.Equal(t, int64(want), n)
		usage, err := c.MemoryUsage(ctx, k).Result()
		require.NoError(t, err)
		t.Logf("%v: MEMORY USAGE %d bytes (key %d bytes, value %d bytes)", a, usage, len(k), n)
		usages[a] = usage
	}
	// ADR 0029: GCRA's 12-byte value (revision 1) is an embedded string in
	// jemalloc's 32-byte class, the others' (15 to 24 bytes) in the 48-byte
	// one: 16 bytes less per subject.
	for _, a := range []ratelimit.Algorithm{ratelimit.AlgorithmFixedWindow, ratelimit.AlgorithmSlidingWindowCounter, ratelimit.AlgorithmTokenBucket} {
		require.Equal(t, usages[a]-16, usages[ratelimit.AlgorithmGCRA], "GCRA's state below %v's", a)
	}
}
