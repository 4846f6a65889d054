package rediscache

// Service lane: behaviour claims checked against a real redis-server that
// each test starts through redistest (skipped under -short; fails under
// REDIS_REQUIRED=1 when no server is available).

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
	"github.com/tech-log/tech-log-backend/shared-contract/cache"
	"github.com/tech-log/tech-log-backend/shared-contract/keyspace"
)

// lane is one test's server, the cache's own client and a Store with a
// random key prefix (so a shared external test server stays partitioned).
type lane struct {
	srv    *redistest.Server
	admin  *redis.Client
	client *redis.Client
	keys   *keyspace.Builder
	store  *Store
}

func startLane(t *testing.T) *lane {
	t.Helper()
	srv := redistest.Start(t)
	cfg := DefaultConfig(srv.Addr())
	// Generous bounds: the race detector on two noisy cores is slow, and no
	// test here asserts latency.
	cfg.CommandTimeout, cfg.DialTimeout, cfg.PoolTimeout = 5*time.Second, 2*time.Second, 5*time.Second
	client, err := NewClient(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.Close() })

	var p [6]byte
	_, _ = rand.Read(p[:])
	secret, err := keyspace.NewSecret([]byte("service-lane-secret-0123456789abcdefghij"))
	require.NoError(t, err)
	keys, err := keyspace.NewBuilder("t"+hex.EncodeToString(p[:]), secret)
	require.NoError(t, err)
	store, err := New(client, keys)
	require.NoError(t, err)
	return &lane{srv: srv, admin: srv.Client(), client: client, keys: keys, store: store}
}

func (l *lane) physical(t *testing.T, k cache.Key) string {
	t.Helper()
	p, err := l.keys.Key("cache", k.Region, k.Kind, k.Name)
	require.NoError(t, err)
	return p
}

// requireFiniteTTL checks that k exists with 0 < PTTL <= ttl.
func (l *lane) requireFiniteTTL(t *testing.T, k cache.Key, ttl time.Duration) {
	t.Helper()
	pttl, err := l.admin.PTTL(context.Background(), l.physical(t, k)).Result()
	require.NoError(t, err)
	require.Greater(t, pttl, time.Duration(0), "PTTL must be positive (-1 = no expiry, -2 = missing)")
	require.LessOrEqual(t, pttl, ttl)
}

func TestServiceGetSetRoundTrip(t *testing.T) {
	l := startLane(t)
	ctx := context.Background()
	k := cache.Key{Region: "profile", Kind: "page", Name: "user-1"}

	_, hit, err := l.store.Get(ctx, k)
	require.NoError(t, err)
	require.False(t, hit, "nothing stored yet")

	for _, v := range [][]byte{[]byte("hello"), {}, {0, 0xff, '\r', '\n', 0}, make([]byte, cache.MaxValueLen)} {
		require.NoError(t, l.store.Set(ctx, k, v, time.Minute))
		e, hit, err := l.store.Get(ctx, k)
		require.NoError(t, err)
		require.True(t, hit)
		require.Equal(t, v, e.Value)
		_, err = parseToken(e.Token)
		require.NoError(t, err, "Get returns a well-formed token")
		l.requireFiniteTTL(t, k, time.Minute)
	}
	raw, err := l.admin.Get(ctx, l.physical(t, k)).Bytes()
	require.NoError(t, err)
	assert.Len(t, raw, headerLen+cache.MaxValueLen, "stored layout: header then value")
}

func TestServiceSetIfAbsentSecondWriterLoses(t *testing.T) {
	l := startLane(t)
	ctx := context.Background()
	k := cache.Key{Region: "lock", Kind: "job", Name: "nightly"}

	ok, err := l.store.SetIfAbsent(ctx, k, []byte("first"), time.Minute)
	require.NoError(t, err)
	require.True(t, ok)
	l.requireFiniteTTL(t, k, time.Minute)

	ok, err = l.store.SetIfAbsent(ctx, k, []byte("second"), time.Hour)
	require.NoError(t, err)
	require.False(t, ok)
	e, hit, err := l.store.Get(ctx, k)
	require.NoError(t, err)
	require.True(t, hit)
	assert.Equal(t, "first", string(e.Value))
	l.requireFiniteTTL(t, k, time.Minute) // the loser did not touch the TTL either

	require.NoError(t, l.store.Delete(ctx, k))
	ok, err = l.store.SetIfAbsent(ctx, k, []byte("third"), time.Minute)
	require.NoError(t, err)
	assert.True(t, ok, "absent again after Delete")
}

func TestServiceSetIfAbsentConcurrentExactlyOneWins(t *testing.T) {
	l := startLane(t)
	k := cache.Key{Region: "lock", Kind: "job", Name: "race"}
	const writers = 16
	var wins atomic.Int32
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make(chan error, writers)
	for range writers {
		wg.Go(func() {
			<-start
			ok, err := l.store.SetIfAbsent(context.Background(), k, []byte("v"), time.Minute)
			if err != nil {
				errs <- err
			}
			if ok {
				wins.Add(1)
			}
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	assert.Equal(t, int32(1), wins.Load())
}

func TestServiceTTLFiniteAfterEveryWrite(t *testing.T) {
	l := startLane(t)
	ctx := context.Background()
	ttls := []time.Duration{time.Millisecond * 1500, 10 * time.Second, cache.MaxTTL}
	for i, ttl := range ttls {
		k := cache.Key{Region: "ttl", Kind: "case", Name: string(rune('a' + i))}
		ok, err := l.store.SetIfAbsent(ctx, k, []byte("a"), ttl)
		require.NoError(t, err)
		require.True(t, ok)
		l.requireFiniteTTL(t, k, ttl)

		require.NoError(t, l.store.Set(ctx, k, []byte("b"), ttl))
		l.requireFiniteTTL(t, k, ttl)

		e, _, err := l.store.Get(ctx, k)
		require.NoError(t, err)
		ok, err = l.store.CompareAndReplace(ctx, k, e.Token, []byte("c"), ttl)
		require.NoError(t, err)
		require.True(t, ok)
		l.requireFiniteTTL(t, k, ttl)
	}
	// A shorter TTL on a later write replaces a longer one: the TTL always
	// comes from the latest write.
	k := cache.Key{Region: "ttl", Kind: "case", Name: "shrink"}
	require.NoError(t, l.store.Set(ctx, k, []byte("long"), time.Hour))
	require.NoError(t, l.store.Set(ctx, k, []byte("short"), 2*time.Second))
	l.requireFiniteTTL(t, k, 2*time.Second)

	// Every key this store wrote carries an expiry.
	keys := scanAll(t, l)
	require.Len(t, keys, len(ttls)+1)
	for _, pk := range keys {
		pttl, err := l.admin.PTTL(ctx, pk).Result()
		require.NoError(t, err)
		assert.Greater(t, pttl, time.Duration(0), pk)
	}
}

func TestServiceEntriesExpire(t *testing.T) {
	l := startLane(t)
	ctx := context.Background()
	k := cache.Key{Region: "ttl", Kind: "case", Name: "short"}
	require.NoError(t, l.store.Set(ctx, k, []byte("v"), 50*time.Millisecond))
	require.Eventually(t, func() bool {
		_, hit, err := l.store.Get(ctx, k)
		return err == nil && !hit
	}, 5*time.Second, 20*time.Millisecond)
}

func TestServiceDelete(t *testing.T) {
	l := startLane(t)
	ctx := context.Background()
	k := cache.Key{Region: "profile", Kind: "page", Name: "gone"}
	other := cache.Key{Region: "profile", Kind: "page", Name: "stays"}
	require.NoError(t, l.store.Delete(ctx, k), "deleting a missing key is not an error")
	require.NoError(t, l.store.Set(ctx, k, []byte("v"), time.Minute))
	require.NoError(t, l.store.Set(ctx, other, []byte("w"), time.Minute))
	require.NoError(t, l.store.Delete(ctx, k))
	_, hit, err := l.store.Get(ctx, k)
	require.NoError(t, err)
	assert.False(t, hit)
	_, hit, err = l.store.Get(ctx, other)
	require.NoError(t, err)
	assert.True(t, hit, "Delete removes only its key")
}

// scanAll returns every key under the lane's cache pattern, bounded.
func scanAll(t *testing.T, l *lane) []string {
	t.Helper()
	var keys []string
	var cursor uint64
	for range 1000 {
		page, next, err := l.admin.Scan(context.Background(), cursor, l.keys.Pattern("cache"), 100).Result()
		require.NoError(t, err)
		keys = append(keys, page...)
		if cursor = next; cursor == 0 {
			return keys
		}
	}
	t.Fatal("SCAN did not finish in 1000 pages")
	return nil
}

func TestServiceNoRawNameInKeys(t *testing.T) {
	l := startLane(t)
	ctx := context.Background()
	names := []string{"alice@example.com", "203.0.113.9", "GET /api/v1/users/42", "sk_live_abcdef0123456789", "ünïcødé name", "a:b:c"}
	for i, n := range names {
		k := cache.Key{Region: "profile", Kind: "page", Name: n}
		switch i % 3 {
		case 0:
			require.NoError(t, l.store.Set(ctx, k, []byte("v"), time.Minute))
		case 1:
			_, err := l.store.SetIfAbsent(ctx, k, []byte("v"), time.Minute)
			require.NoError(t, err)
		case 2:
			require.NoError(t, l.store.Set(ctx, k, []byte("v"), time.Minute))
			e, _, err := l.store.Get(ctx, k)
			require.NoError(t, err)
			_, err = l.store.CompareAndReplace(ctx, k, e.Token, []byte("w"), time.Minute)
			require.NoError(t, err)
		}
	}
	keys := scanAll(t, l)
	require.Len(t, keys, len(names))
	prefix := l.keys.Prefix() + ":cache:profile:page:v1:"
	for _, pk := range keys {
		assert.True(t, strings.HasPrefix(pk, prefix), pk)
		assert.Len(t, pk, len(prefix)+keyspace.DigestLen, pk)
		for _, n := range names {
			assert.NotContains(t, pk, n)
			for _, part := range strings.FieldsFunc(n, func(r rune) bool { return r == '@' || r == ' ' || r == '/' || r == '.' || r == ':' }) {
				if len(part) >= 4 {
					assert.NotContains(t, pk, part, "fragment of a raw name in %s", pk)
				}
			}
		}
	}
}

func TestServiceForeignAndMalformedEntries(t *testing.T) {
	l := startLane(t)
	ctx := context.Background()
	k := cache.Key{Region: "profile", Kind: "page", Name: "foreign"}
	pk := l.physical(t, k)

	t.Run("foreign string", func(t *testing.T) {
		require.NoError(t, l.admin.Set(ctx, pk, "not ours", time.Minute).Err())
		_, hit, err := l.store.Get(ctx, k)
		require.ErrorIs(t, err, ErrMalformedEntry)
		assert.False(t, hit)
		ok, err := l.store.CompareAndReplace(ctx, k, validToken(), []byte("x"), time.Minute)
		require.NoError(t, err)
		assert.False(t, ok)
		v, err := l.admin.Get(ctx, pk).Result()
		require.NoError(t, err)
		assert.Equal(t, "not ours", v)
	})
	t.Run("over-long string", func(t *testing.T) {
		h, err := newHeader(rand.Reader)
		require.NoError(t, err)
		require.NoError(t, l.admin.Set(ctx, pk, encodeEntry(h, make([]byte, cache.MaxValueLen+10)), time.Minute).Err())
		_, hit, err := l.store.Get(ctx, k)
		require.ErrorIs(t, err, ErrMalformedEntry)
		assert.False(t, hit)
	})
	t.Run("hash at the key", func(t *testing.T) {
		require.NoError(t, l.admin.Del(ctx, pk).Err())
		require.NoError(t, l.admin.HSet(ctx, pk, "v", "x").Err())
		_, _, err := l.store.Get(ctx, k)
		require.Error(t, err)
		assert.True(t, redis.HasErrorPrefix(err, "WRONGTYPE"), "%v", err)
		ok, err := l.store.CompareAndReplace(ctx, k, validToken(), []byte("x"), time.Minute)
		require.ErrorIs(t, err, ErrMalformedEntry)
		assert.False(t, ok)
		m, err := l.admin.HGetAll(ctx, pk).Result()
		require.NoError(t, err)
		assert.Equal(t, map[string]string{"v": "x"}, m, "a foreign hash is never overwritten by compare-and-replace")
		pttl, err := l.admin.PTTL(ctx, pk).Result()
		require.NoError(t, err)
		assert.Equal(t, time.Duration(-1), pttl, "nor given a TTL")
	})
}
