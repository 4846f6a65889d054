package rediscache

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tech-log/tech-log-backend/shared-contract/cache"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// scriptedStore is a cache.Store answering every call with (hit/ok, err).
type scriptedStore struct {
	entry cache.Entry
	ok    bool
	err   error
	calls []string
}

func (s *scriptedStore) Get(context.Context, cache.Key) (cache.Entry, bool, error) {
	s.calls = append(s.calls, OpGet)
	return s.entry, s.ok, s.err
}

func (s *scriptedStore) Set(context.Context, cache.Key, []byte, time.Duration) error {
	s.calls = append(s.calls, OpSet)
	return s.err
}

func (s *scriptedStore) SetIfAbsent(context.Context, cache.Key, []byte, time.Duration) (bool, error) {
	s.calls = append(s.calls, OpSetIfAbsent)
	return s.ok, s.err
}

func (s *scriptedStore) CompareAndReplace(context.Context, cache.Key, cache.Token, []byte, time.Duration) (bool, error) {
	s.calls = append(s.calls, OpCompareAndReplace)
	return s.ok, s.err
}

func (s *scriptedStore) Delete(context.Context, cache.Key) error {
	s.calls = append(s.calls, OpDelete)
	return s.err
}

type failure struct {
	op  string
	err error
}

type recorder struct {
	mu  sync.Mutex
	got []failure
}

func (r *recorder) record(op string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, failure{op, err})
}

// result is what one decorated call returned.
type result struct {
	hit bool
	err error
	val []byte
}

var allOps = []struct {
	op string
	do func(cache.Store) result
}{
	{OpGet, func(s cache.Store) result {
		e, hit, err := s.Get(context.Background(), goodKey)
		return result{hit, err, e.Value}
	}},
	{OpSet, func(s cache.Store) result {
		return result{err: s.Set(context.Background(), goodKey, []byte("v"), time.Second)}
	}},
	{OpSetIfAbsent, func(s cache.Store) result {
		ok, err := s.SetIfAbsent(context.Background(), goodKey, []byte("v"), time.Second)
		return result{hit: ok, err: err}
	}},
	{OpCompareAndReplace, func(s cache.Store) result {
		ok, err := s.CompareAndReplace(context.Background(), goodKey, validToken(), []byte("v"), time.Second)
		return result{hit: ok, err: err}
	}},
	{OpDelete, func(s cache.Store) result { return result{err: s.Delete(context.Background(), goodKey)} }},
}

func TestFailOpenSwallowsAndCountsBackendErrors(t *testing.T) {
	backend := []error{
		serverErr("LOADING Redis is loading the dataset in memory"),
		fmt.Errorf("rediscache: get: %w", ErrMalformedEntry),
		context.DeadlineExceeded,
		errors.New("dial tcp 127.0.0.1:1: connect: connection refused"),
	}
	for _, berr := range backend {
		for _, o := range allOps {
			t.Run(o.op+"/"+berr.Error(), func(t *testing.T) {
				// The inner store claims success alongside the error: the
				// decorator must still answer a miss / false.
				inner := &scriptedStore{entry: cache.Entry{Value: []byte("stale")}, ok: true, err: berr}
				rec := &recorder{}
				f, err := NewFailOpen(inner, rec.record)
				require.NoError(t, err)
				got := o.do(f)
				require.NoError(t, got.err)
				assert.False(t, got.hit, "a failure is a miss / not stored")
				assert.Nil(t, got.val)
				assert.Equal(t, []string{o.op}, inner.calls)
				require.Len(t, rec.got, 1)
				assert.Equal(t, o.op, rec.got[0].op)
				assert.ErrorIs(t, rec.got[0].err, berr)
			})
		}
	}
}

func TestFailOpenPassesInvalidInputThrough(t *testing.T) {
	for _, sentinel := range []error{cache.ErrInvalidKey, cache.ErrInvalidTTL, cache.ErrInvalidValue, cache.ErrInvalidToken} {
		for _, o := range allOps {
			t.Run(o.op+"/"+sentinel.Error(), func(t *testing.T) {
				inner := &scriptedStore{err: fmt.Errorf("rediscache: %s: %w", o.op, errors.Join(sentinel))}
				rec := &recorder{}
				f, err := NewFailOpen(inner, rec.record)
				require.NoError(t, err)
				got := o.do(f)
				require.ErrorIs(t, got.err, sentinel)
				assert.False(t, got.hit)
				assert.Empty(t, rec.got, "caller bugs are not backend failures")
			})
		}
	}
}

func TestFailOpenPassesSuccessThrough(t *testing.T) {
	for _, ok := range []bool{true, false} {
		for _, o := range allOps {
			t.Run(fmt.Sprintf("%s/%v", o.op, ok), func(t *testing.T) {
				inner := &scriptedStore{entry: cache.Entry{Value: []byte("v"), Token: validToken()}, ok: ok}
				rec := &recorder{}
				f, err := NewFailOpen(inner, rec.record)
				require.NoError(t, err)
				got := o.do(f)
				require.NoError(t, got.err)
				switch o.op {
				case OpGet, OpSetIfAbsent, OpCompareAndReplace:
					assert.Equal(t, ok, got.hit)
				}
				if o.op == OpGet && ok {
					assert.Equal(t, []byte("v"), got.val)
				}
				assert.Empty(t, rec.got)
			})
		}
	}
}

func TestFailOpenWithRealStoreValidation(t *testing.T) {
	// Through the real Store: invalid input still reaches the caller, and
	// no command is sent.
	s, fake := newFakeStore(t)
	rec := &recorder{}
	f, err := NewFailOpen(s, rec.record)
	require.NoError(t, err)
	_, err = f.CompareAndReplace(context.Background(), goodKey, "not-a-token", []byte("v"), time.Second)
	require.ErrorIs(t, err, cache.ErrInvalidToken)
	require.ErrorIs(t, f.Set(context.Background(), goodKey, []byte("v"), 0), cache.ErrInvalidTTL)
	assert.Empty(t, rec.got)
	assert.Empty(t, fake.callNames())
}

func TestNewFailOpenRejects(t *testing.T) {
	rec := &recorder{}
	_, err := NewFailOpen(nil, rec.record)
	require.ErrorIs(t, err, ErrNilDependency)
	_, err = NewFailOpen(&scriptedStore{}, nil)
	require.ErrorIs(t, err, ErrNilDependency)
	f, err := NewFailOpen(&scriptedStore{}, rec.record)
	require.NoError(t, err)
	_, err = NewFailOpen(f, rec.record)
	require.Error(t, err, "double wrapping would count every failure twice")
}

// TestFailOpenCannotWrapEdgePort: the cache and coordination ports are
// disjoint types, so no rate-limit provider can be passed to NewFailOpen
// (a compile error), and nothing here can stand in for an EdgePort.
func TestFailOpenCannotWrapEdgePort(t *testing.T) {
	storeT := reflect.TypeFor[cache.Store]()
	edgeT := reflect.TypeFor[ratelimit.EdgePort]()

	assert.False(t, edgeT.Implements(storeT), "ratelimit.EdgePort must not satisfy cache.Store")
	assert.False(t, storeT.Implements(edgeT), "cache.Store must not satisfy ratelimit.EdgePort")
	for _, typ := range []reflect.Type{reflect.TypeFor[*FailOpen](), reflect.TypeFor[*Store]()} {
		assert.True(t, typ.Implements(storeT), typ.String())
		assert.False(t, typ.Implements(edgeT), "%s must not be usable as an EdgePort", typ)
	}
	fn := reflect.TypeOf(NewFailOpen)
	require.Equal(t, 2, fn.NumIn())
	assert.Equal(t, storeT, fn.In(0), "NewFailOpen accepts exactly cache.Store")
	for i := range fn.NumIn() {
		assert.NotEqual(t, edgeT, fn.In(i))
		assert.NotEqual(t, reflect.TypeFor[any](), fn.In(i), "no escape hatch through any")
	}
}
