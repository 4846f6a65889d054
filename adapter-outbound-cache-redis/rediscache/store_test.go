package rediscache

import (
	"bytes"
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tech-log/tech-log-backend/shared-contract/cache"
	"github.com/tech-log/tech-log-backend/shared-contract/keyspace"
)

// rawName is a Name that must never show up in a key or an error.
const rawName = "user@example.com/secret-session"

var goodKey = cache.Key{Region: "profile", Kind: "page", Name: rawName}

func newFakeStore(t *testing.T, opts ...Option) (*Store, *fakeRedis) {
	t.Helper()
	f := newFake()
	s, err := newStore(f, testKeys(t), opts...)
	require.NoError(t, err)
	return s, f
}

func validToken() cache.Token { return cache.Token("c1" + strings.Repeat("0f", versionBytes)) }

func TestNewRejectsMissingDependencies(t *testing.T) {
	keys := testKeys(t)
	_, err := New(nil, keys)
	require.ErrorIs(t, err, ErrNilDependency)
	_, err = newStore(newFake(), nil)
	require.ErrorIs(t, err, ErrNilDependency)
	_, err = newStore(newFake(), &keyspace.Builder{})
	require.ErrorIs(t, err, keyspace.ErrZeroSecret, "a zero Builder fails at construction")
	_, err = newStore(newFake(), keys, WithRandom(nil))
	require.ErrorIs(t, err, ErrNilDependency)

	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { _ = c.Close() })
	s, err := New(c, keys)
	require.NoError(t, err)
	require.NotNil(t, s)
}

// TestStoreRejectsInvalidInputBeforeRedis: every invalid input is an error
// wrapping the cache sentinel, no command is sent and no error names Name.
func TestStoreRejectsInvalidInputBeforeRedis(t *testing.T) {
	badKeys := map[string]cache.Key{
		"empty region":  {Region: "", Kind: "k", Name: rawName},
		"upper region":  {Region: "Profile", Kind: "k", Name: rawName},
		"colon in kind": {Region: "r", Kind: "a:b", Name: rawName},
		"empty name":    {Region: "r", Kind: "k", Name: ""},
		"long name":     {Region: "r", Kind: "k", Name: rawName + strings.Repeat("x", cache.MaxNameLen)},
	}
	badTTLs := map[string]time.Duration{
		"zero ttl":     0,
		"negative ttl": -time.Second,
		"sub-ms ttl":   time.Microsecond,
		"fraction ms":  1500 * time.Microsecond,
		"over max ttl": cache.MaxTTL + time.Millisecond,
	}
	bigValue := make([]byte, cache.MaxValueLen+1)
	badTokens := map[string]cache.Token{
		"empty token":   "",
		"foreign token": cache.Token(rawName),
		"short token":   validToken()[:20],
	}

	type op struct {
		name string
		do   func(s *Store) error
	}
	ctx := context.Background()
	var ops []struct {
		op
		want error
	}
	add := func(name string, want error, do func(s *Store) error) {
		ops = append(ops, struct {
			op
			want error
		}{op{name, do}, want})
	}
	for n, k := range badKeys {
		add("get/"+n, cache.ErrInvalidKey, func(s *Store) error { _, _, err := s.Get(ctx, k); return err })
		add("set/"+n, cache.ErrInvalidKey, func(s *Store) error { return s.Set(ctx, k, []byte("v"), time.Second) })
		add("setnx/"+n, cache.ErrInvalidKey, func(s *Store) error { _, err := s.SetIfAbsent(ctx, k, []byte("v"), time.Second); return err })
		add("car/"+n, cache.ErrInvalidKey, func(s *Store) error {
			_, err := s.CompareAndReplace(ctx, k, validToken(), []byte("v"), time.Second)
			return err
		})
		add("delete/"+n, cache.ErrInvalidKey, func(s *Store) error { return s.Delete(ctx, k) })
	}
	for n, ttl := range badTTLs {
		add("set/"+n, cache.ErrInvalidTTL, func(s *Store) error { return s.Set(ctx, goodKey, []byte("v"), ttl) })
		add("setnx/"+n, cache.ErrInvalidTTL, func(s *Store) error { _, err := s.SetIfAbsent(ctx, goodKey, []byte("v"), ttl); return err })
		add("car/"+n, cache.ErrInvalidTTL, func(s *Store) error {
			_, err := s.CompareAndReplace(ctx, goodKey, validToken(), []byte("v"), ttl)
			return err
		})
	}
	add("set/big value", cache.ErrInvalidValue, func(s *Store) error { return s.Set(ctx, goodKey, bigValue, time.Second) })
	add("setnx/big value", cache.ErrInvalidValue, func(s *Store) error { _, err := s.SetIfAbsent(ctx, goodKey, bigValue, time.Second); return err })
	add("car/big value", cache.ErrInvalidValue, func(s *Store) error {
		_, err := s.CompareAndReplace(ctx, goodKey, validToken(), bigValue, time.Second)
		return err
	})
	for n, tok := range badTokens {
		add("car/"+n, cache.ErrInvalidToken, func(s *Store) error {
			_, err := s.CompareAndReplace(ctx, goodKey, tok, []byte("v"), time.Second)
			return err
		})
	}
	add("car/every violation joined", cache.ErrInvalidToken, func(s *Store) error {
		_, err := s.CompareAndReplace(ctx, badKeys["empty name"], "", bigValue, 0)
		if err != nil {
			for _, want := range []error{cache.ErrInvalidKey, cache.ErrInvalidValue, cache.ErrInvalidTTL} {
				if !errors.Is(err, want) {
					return errors.New("missing " + want.Error())
				}
			}
		}
		return err
	})

	for _, tt := range ops {
		t.Run(tt.name, func(t *testing.T) {
			s, f := newFakeStore(t)
			err := tt.do(s)
			require.ErrorIs(t, err, tt.want)
			assert.True(t, IsInvalidInput(err))
			assert.NotContains(t, err.Error(), rawName)
			assert.Empty(t, f.callNames(), "no command may reach Redis")
		})
	}
}

func TestStoreWritesUseDerivedKeyFreshVersionAndTTL(t *testing.T) {
	keys := testKeys(t)
	wantKey, err := keys.Key("cache", goodKey.Region, goodKey.Kind, goodKey.Name)
	require.NoError(t, err)
	ctx := context.Background()
	s, f := newFakeStore(t)
	f.answer("setnx", reply{val: true})
	f.answer("evalsha", reply{val: int64(1)})
	f.answer("del", reply{val: int64(1)})

	require.NoError(t, s.Set(ctx, goodKey, []byte("v1"), 1500*time.Millisecond))
	stored, err := s.SetIfAbsent(ctx, goodKey, []byte("v2"), time.Minute)
	require.NoError(t, err)
	require.True(t, stored)
	tok := validToken()
	replaced, err := s.CompareAndReplace(ctx, goodKey, tok, []byte("v3"), 42*time.Millisecond)
	require.NoError(t, err)
	require.True(t, replaced)
	require.NoError(t, s.Delete(ctx, goodKey))
	_, _, err = s.Get(ctx, goodKey)
	require.NoError(t, err)

	require.Equal(t, []string{"set", "setnx", "evalsha", "del", "getrange"}, f.callNames())
	headers := map[string]bool{}
	for _, c := range f.calls {
		assert.Equal(t, wantKey, c.key, c.name)
		assert.NotContains(t, c.key, rawName)
		assert.True(t, strings.HasPrefix(c.key, "tlb:cache:profile:page:v1:"), c.key)
	}
	for i, want := range []struct {
		value string
		ttl   time.Duration
	}{{"v1", 1500 * time.Millisecond}, {"v2", time.Minute}} {
		c := f.calls[i]
		raw, ok := c.args[0].([]byte)
		require.True(t, ok, "%s sends bytes", c.name)
		require.True(t, isHeader(raw[:headerLen]))
		assert.Equal(t, want.value, string(raw[headerLen:]))
		assert.Equal(t, want.ttl, c.ttl)
		headers[string(raw[:headerLen])] = true
	}
	car := f.calls[2]
	require.Len(t, car.args, 4)
	assert.Equal(t, s.car.script.Hash(), car.args[0])
	assert.Equal(t, string(tok), car.args[1], "ARGV[1] is the expected header")
	raw, ok := car.args[2].([]byte)
	require.True(t, ok)
	assert.Equal(t, "v3", string(raw[headerLen:]))
	assert.NotEqual(t, string(tok), string(raw[:headerLen]), "a replacement gets a new version")
	headers[string(raw[:headerLen])] = true
	assert.Equal(t, int64(42), car.args[3], "ARGV[3] is the TTL in ms")
	assert.Len(t, headers, 3, "each write has its own version")

	get := f.calls[4]
	assert.Equal(t, int64(0), get.start)
	assert.Equal(t, int64(maxStoredLen), get.end, "GETRANGE reads at most one byte past a valid entry")
}

func TestStoreGetReplies(t *testing.T) {
	h, err := newHeader(bytes.NewReader(bytes.Repeat([]byte{7}, versionBytes)))
	require.NoError(t, err)
	connErr := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	tests := []struct {
		name      string
		reply     reply
		wantHit   bool
		wantValue string
		wantErr   error
	}{
		{"empty string is a miss", reply{val: ""}, false, "", nil},
		{"nil is a miss", reply{err: redis.Nil}, false, "", nil},
		{"entry", reply{val: string(encodeEntry(h, []byte("payload")))}, true, "payload", nil},
		{"empty value entry", reply{val: string(encodeEntry(h, nil))}, true, "", nil},
		{"foreign string", reply{val: "hello"}, false, "", ErrMalformedEntry},
		{"over-long string", reply{val: string(encodeEntry(h, make([]byte, cache.MaxValueLen+1)))}, false, "", ErrMalformedEntry},
		{"wrong type", reply{err: serverErr("WRONGTYPE Operation against a key holding the wrong kind of value")}, false, "", serverErr("WRONGTYPE Operation against a key holding the wrong kind of value")},
		{"connection error", reply{err: connErr}, false, "", connErr},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, f := newFakeStore(t)
			f.answer("getrange", tt.reply)
			e, hit, err := s.Get(context.Background(), goodKey)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				assert.False(t, IsInvalidInput(err))
				assert.False(t, hit)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.wantHit, hit)
			if hit {
				assert.Equal(t, tt.wantValue, string(e.Value))
				assert.Equal(t, h.token(), e.Token)
			}
		})
	}
}

func TestStoreWriteReplies(t *testing.T) {
	ctx := context.Background()
	boom := serverErr("OOM command not allowed when used memory > 'maxmemory'.")
	t.Run("set status not OK", func(t *testing.T) {
		s, f := newFakeStore(t)
		f.answer("set", reply{val: "QUEUED"})
		require.ErrorIs(t, s.Set(ctx, goodKey, nil, time.Second), ErrUnexpectedReply)
	})
	t.Run("set error", func(t *testing.T) {
		s, f := newFakeStore(t)
		f.answer("set", reply{err: boom})
		err := s.Set(ctx, goodKey, nil, time.Second)
		require.ErrorIs(t, err, boom)
		assert.False(t, IsInvalidInput(err))
	})
	t.Run("setnx loses", func(t *testing.T) {
		s, f := newFakeStore(t)
		f.answer("setnx", reply{val: false})
		ok, err := s.SetIfAbsent(ctx, goodKey, nil, time.Second)
		require.NoError(t, err)
		assert.False(t, ok)
	})
	t.Run("setnx error", func(t *testing.T) {
		s, f := newFakeStore(t)
		f.answer("setnx", reply{err: boom})
		ok, err := s.SetIfAbsent(ctx, goodKey, nil, time.Second)
		require.ErrorIs(t, err, boom)
		assert.False(t, ok)
	})
	t.Run("delete odd count", func(t *testing.T) {
		s, f := newFakeStore(t)
		f.answer("del", reply{val: int64(2)})
		require.ErrorIs(t, s.Delete(ctx, goodKey), ErrUnexpectedReply)
	})
	t.Run("delete missing is fine", func(t *testing.T) {
		s, f := newFakeStore(t)
		f.answer("del", reply{val: int64(0)})
		require.NoError(t, s.Delete(ctx, goodKey))
	})
	t.Run("random source fails", func(t *testing.T) {
		s, f := newFakeStore(t, WithRandom(bytes.NewReader(nil)))
		err := s.Set(ctx, goodKey, nil, time.Second)
		require.Error(t, err)
		assert.False(t, IsInvalidInput(err))
		assert.Empty(t, f.callNames())
	})
}

func TestCompareAndReplaceReplies(t *testing.T) {
	tests := []struct {
		name    string
		reply   reply
		want    bool
		wantErr error
	}{
		{"replaced", reply{val: int64(1)}, true, nil},
		{"not replaced", reply{val: int64(0)}, false, nil},
		{"script saw invalid args", reply{val: int64(-1)}, false, ErrUnexpectedReply},
		{"wrong type", reply{val: int64(-2)}, false, ErrMalformedEntry},
		{"out of range code", reply{val: int64(7)}, false, ErrUnexpectedReply},
		{"string reply", reply{val: "OK"}, false, ErrUnexpectedReply},
		{"array reply", reply{val: []any{int64(1)}}, false, ErrUnexpectedReply},
		{"nil reply", reply{err: redis.Nil}, false, ErrUnexpectedReply},
		{"server error", reply{err: serverErr("BUSY Redis is busy running a script")}, false, serverErr("BUSY Redis is busy running a script")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, f := newFakeStore(t)
			f.answer("evalsha", tt.reply)
			ok, err := s.CompareAndReplace(context.Background(), goodKey, validToken(), []byte("v"), time.Second)
			assert.Equal(t, tt.want, ok)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				assert.False(t, IsInvalidInput(err))
			} else {
				require.NoError(t, err)
			}
			assert.Equal(t, []string{"evalsha"}, f.callNames(), "no EVAL without NOSCRIPT")
		})
	}
}
