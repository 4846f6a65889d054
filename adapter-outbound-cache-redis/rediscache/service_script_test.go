package rediscache

import (
	"context"
	"crypto/rand"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
	"github.com/tech-log/tech-log-backend/shared-contract/cache"
)

func TestServiceCompareAndReplaceTokens(t *testing.T) {
	l := startLane(t)
	ctx := context.Background()
	k := cache.Key{Region: "profile", Kind: "page", Name: "user-2"}
	get := func() cache.Entry {
		t.Helper()
		e, hit, err := l.store.Get(ctx, k)
		require.NoError(t, err)
		require.True(t, hit)
		return e
	}
	car := func(tok cache.Token, v string) bool {
		t.Helper()
		ok, err := l.store.CompareAndReplace(ctx, k, tok, []byte(v), 30*time.Second)
		require.NoError(t, err)
		return ok
	}

	// Absent key: any token loses and nothing is created.
	require.False(t, car(validToken(), "x"))
	n, err := l.admin.Exists(ctx, l.physical(t, k)).Result()
	require.NoError(t, err)
	require.Zero(t, n)

	require.NoError(t, l.store.Set(ctx, k, []byte("v1"), time.Minute))
	t1 := get().Token

	// Fresh token wins, and its write gets a new token with a finite TTL.
	require.True(t, car(t1, "v2"))
	e2 := get()
	assert.Equal(t, "v2", string(e2.Value))
	assert.NotEqual(t, t1, e2.Token)
	l.requireFiniteTTL(t, k, 30*time.Second)

	// Stale token loses and changes nothing.
	require.False(t, car(t1, "v3"))
	assert.Equal(t, e2, get())

	// Same bytes written again (Set): the old token is invalidated (ABA).
	require.NoError(t, l.store.Set(ctx, k, []byte("v2"), time.Minute))
	e3 := get()
	require.Equal(t, e2.Value, e3.Value)
	require.NotEqual(t, e2.Token, e3.Token)
	require.False(t, car(e2.Token, "late"))

	// Same bytes via CompareAndReplace itself.
	require.True(t, car(e3.Token, "v2"))
	e4 := get()
	require.Equal(t, e3.Value, e4.Value)
	require.False(t, car(e3.Token, "late"))

	// Delete and recreate with the same bytes: the old token stays dead.
	require.NoError(t, l.store.Delete(ctx, k))
	require.False(t, car(e4.Token, "late"))
	ok, err := l.store.SetIfAbsent(ctx, k, []byte("v2"), time.Minute)
	require.NoError(t, err)
	require.True(t, ok)
	require.False(t, car(e4.Token, "late"))
	assert.Equal(t, "v2", string(get().Value))
	require.True(t, car(get().Token, "v5"))
	assert.Equal(t, "v5", string(get().Value))
}

func TestServiceCompareAndReplaceConcurrentExactlyOneWins(t *testing.T) {
	l := startLane(t)
	ctx := context.Background()
	k := cache.Key{Region: "profile", Kind: "page", Name: "contended"}
	require.NoError(t, l.store.Set(ctx, k, []byte("base"), time.Minute))
	e, hit, err := l.store.Get(ctx, k)
	require.NoError(t, err)
	require.True(t, hit)

	const writers = 16
	won := make([]bool, writers)
	errs := make([]error, writers)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range writers {
		wg.Go(func() {
			<-start
			won[i], errs[i] = l.store.CompareAndReplace(context.Background(), k, e.Token, []byte{'w', byte('a' + i)}, time.Minute)
		})
	}
	close(start)
	wg.Wait()
	winner := -1
	for i := range writers {
		require.NoError(t, errs[i])
		if won[i] {
			require.Equal(t, -1, winner, "a second writer won with the same token")
			winner = i
		}
	}
	require.NotEqual(t, -1, winner, "exactly one writer must win")
	final, hit, err := l.store.Get(ctx, k)
	require.NoError(t, err)
	require.True(t, hit)
	assert.Equal(t, []byte{'w', byte('a' + winner)}, final.Value, "the stored value is the winner's")
}

// TestServiceScriptValidatesArguments calls the program directly, as another
// client could: every out-of-range argument is refused with INVALID (-1)
// before anything is read or written.
func TestServiceScriptValidatesArguments(t *testing.T) {
	l := startLane(t)
	ctx := context.Background()
	k := cache.Key{Region: "profile", Kind: "page", Name: "direct"}
	pk := l.physical(t, k)
	require.NoError(t, l.store.Set(ctx, k, []byte("v"), time.Minute))
	e, _, err := l.store.Get(ctx, k)
	require.NoError(t, err)
	before, err := l.admin.Get(ctx, pk).Result()
	require.NoError(t, err)
	fresh, err := newHeader(rand.Reader)
	require.NoError(t, err)
	repl := string(encodeEntry(fresh, []byte("new")))
	tok := string(e.Token)

	tests := []struct {
		name string
		keys []string
		args []any
	}{
		{"no keys", nil, []any{tok, repl, 1000}},
		{"two keys", []string{pk, pk + "x"}, []any{tok, repl, 1000}},
		{"missing ttl", []string{pk}, []any{tok, repl}},
		{"extra arg", []string{pk}, []any{tok, repl, 1000, "x"}},
		{"short token", []string{pk}, []any{tok[:33], repl, 1000}},
		{"uppercase token", []string{pk}, []any{strings.ToUpper(tok), repl, 1000}},
		{"replacement without header", []string{pk}, []any{tok, "new", 1000}},
		{"replacement with bad header", []string{pk}, []any{tok, "c1" + strings.Repeat("z", 32) + "new", 1000}},
		{"replacement too long", []string{pk}, []any{tok, repl[:headerLen] + strings.Repeat("x", cache.MaxValueLen+1), 1000}},
		{"zero ttl", []string{pk}, []any{tok, repl, 0}},
		{"negative ttl", []string{pk}, []any{tok, repl, -5}},
		{"fractional ttl", []string{pk}, []any{tok, repl, "1.5"}},
		{"leading zero ttl", []string{pk}, []any{tok, repl, "0100"}},
		{"ttl over max", []string{pk}, []any{tok, repl, cache.MaxTTL.Milliseconds() + 1}},
		{"ttl huge", []string{pk}, []any{tok, repl, "99999999999999999999"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, err := l.admin.Eval(ctx, compareAndReplaceSource, tt.keys, tt.args...).Int64()
			require.NoError(t, err)
			assert.Equal(t, carInvalid, n)
			after, err := l.admin.Get(ctx, pk).Result()
			require.NoError(t, err)
			assert.Equal(t, before, after, "nothing written")
		})
	}
	// The same call with valid arguments replaces (so the table above is not
	// vacuous).
	n, err := l.admin.Eval(ctx, compareAndReplaceSource, []string{pk}, tok, repl, cache.MaxTTL.Milliseconds()).Int64()
	require.NoError(t, err)
	assert.Equal(t, carReplaced, n)
}

func TestServiceScriptFlushFallsBackToEval(t *testing.T) {
	l := startLane(t)
	ctx := context.Background()
	sha, err := l.admin.ScriptLoad(ctx, compareAndReplaceSource).Result()
	require.NoError(t, err)
	require.Equal(t, l.store.car.script.Hash(), sha, "our SHA is the server's SHA of the embedded source")

	k := cache.Key{Region: "profile", Kind: "page", Name: "flush"}
	for i := range 3 {
		require.NoError(t, l.admin.ScriptFlush(ctx).Err())
		require.NoError(t, l.store.Set(ctx, k, []byte("v"), time.Minute))
		e, _, err := l.store.Get(ctx, k)
		require.NoError(t, err)
		ok, err := l.store.CompareAndReplace(ctx, k, e.Token, []byte{byte('a' + i)}, time.Minute)
		require.NoError(t, err, "NOSCRIPT must fall back to EVAL")
		require.True(t, ok)
		got, _, err := l.store.Get(ctx, k)
		require.NoError(t, err)
		require.Equal(t, []byte{byte('a' + i)}, got.Value)
	}
	exists, err := l.admin.ScriptExists(ctx, sha).Result()
	require.NoError(t, err)
	assert.Equal(t, []bool{true}, exists, "the EVAL fallback cached the script again")
}

// TestServiceFailOpenOnKilledServer: with the server gone, the raw Store
// returns errors and the decorator answers misses / no-ops and counts each.
func TestServiceFailOpenOnKilledServer(t *testing.T) {
	l := startLane(t)
	l.srv.Require(t, redistest.CapKill)
	ctx := context.Background()
	k := cache.Key{Region: "profile", Kind: "page", Name: "kill"}
	require.NoError(t, l.store.Set(ctx, k, []byte("v"), time.Minute))
	e, hit, err := l.store.Get(ctx, k)
	require.NoError(t, err)
	require.True(t, hit)

	var mu sync.Mutex
	counts := map[string]int{}
	fo, err := NewFailOpen(l.store, func(op string, err error) {
		mu.Lock()
		defer mu.Unlock()
		counts[op]++
		assert.False(t, IsInvalidInput(err), "%s: %v", op, err)
	})
	require.NoError(t, err)

	l.srv.Kill()

	// The raw store reports the failure ...
	_, _, err = l.store.Get(ctx, k)
	require.Error(t, err)
	assert.False(t, IsInvalidInput(err))

	// ... the decorator does not, twice over, so stale pooled connections
	// and fresh (refused) dials are both covered.
	for range 2 {
		_, hit, err = fo.Get(ctx, k)
		require.NoError(t, err)
		assert.False(t, hit)
		require.NoError(t, fo.Set(ctx, k, []byte("v"), time.Minute))
		ok, err := fo.SetIfAbsent(ctx, k, []byte("v"), time.Minute)
		require.NoError(t, err)
		assert.False(t, ok)
		ok, err = fo.CompareAndReplace(ctx, k, e.Token, []byte("v"), time.Minute)
		require.NoError(t, err)
		assert.False(t, ok)
		require.NoError(t, fo.Delete(ctx, k))
	}
	// Invalid input is still the caller's error, server or no server.
	require.ErrorIs(t, fo.Set(ctx, k, []byte("v"), 0), cache.ErrInvalidTTL)

	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, map[string]int{OpGet: 2, OpSet: 2, OpSetIfAbsent: 2, OpCompareAndReplace: 2, OpDelete: 2}, counts)
}
