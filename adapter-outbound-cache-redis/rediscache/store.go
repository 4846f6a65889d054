package rediscache

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/tech-log/tech-log-backend/shared-contract/cache"
	"github.com/tech-log/tech-log-backend/shared-contract/keyspace"
)

// Capability is the keyspace capability of every cache key.
const Capability = "cache"

// Errors a Store returns for what it finds in Redis (as opposed to invalid
// input, which wraps the cache package's sentinels).
var (
	// ErrMalformedEntry: the key holds something this Store did not write
	// (a foreign string, an over-long string or another Redis type).
	ErrMalformedEntry = errors.New("malformed cache entry")
	// ErrUnexpectedReply: Redis answered outside the command's contract.
	ErrUnexpectedReply = errors.New("unexpected cache reply")
)

// ErrNilDependency is returned by New and NewFailOpen for a missing argument.
var ErrNilDependency = errors.New("nil dependency")

// rediser is the part of go-redis the Store uses.
type rediser interface {
	redis.Scripter
	GetRange(ctx context.Context, key string, start, end int64) *redis.StringCmd
	Set(ctx context.Context, key string, value any, expiration time.Duration) *redis.StatusCmd
	SetNX(ctx context.Context, key string, value any, expiration time.Duration) *redis.BoolCmd
	Del(ctx context.Context, keys ...string) *redis.IntCmd
}

// Store is a cache.Store over Redis. Each entry is one string key
// <prefix>:cache:<region>:<kind>:v1:<digest(name)> holding a random version
// header followed by the value (see docs/cache.md); every write sets the
// value and a finite TTL in one command. Invalid input is rejected, wrapping
// the cache package's sentinels, before Redis is touched. Backend failures
// are returned as errors: wrap the Store in FailOpen to turn them into
// misses. Safe for concurrent use; the zero value is invalid.
type Store struct {
	c    rediser
	keys *keyspace.Builder
	rand io.Reader
	car  *scalarScript
}

var _ cache.Store = (*Store)(nil)

// Option configures New.
type Option func(*Store)

// WithRandom sets the source of entry versions (default crypto/rand.Reader).
// It must yield unpredictable, non-repeating bytes: two writes with the same
// version would make a stale token valid again.
func WithRandom(r io.Reader) Option { return func(s *Store) { s.rand = r } }

// New returns a Store over client, which must be the cache's own client
// (NewClient), never the coordination client. keys derives physical keys.
func New(client redis.UniversalClient, keys *keyspace.Builder, opts ...Option) (*Store, error) {
	if client == nil {
		return nil, fmt.Errorf("rediscache: %w: client", ErrNilDependency)
	}
	return newStore(client, keys, opts...)
}

func newStore(c rediser, keys *keyspace.Builder, opts ...Option) (*Store, error) {
	if keys == nil {
		return nil, fmt.Errorf("rediscache: %w: keys", ErrNilDependency)
	}
	// A Builder that cannot derive a key (the zero value) is a wiring bug:
	// report it here, not as invalid input on every call.
	if _, err := keys.Key(Capability, "probe", "probe", "probe"); err != nil {
		return nil, fmt.Errorf("rediscache: keys: %w", err)
	}
	s := &Store{c: c, keys: keys, rand: rand.Reader, car: newScalarScript("compare_and_replace", compareAndReplaceSource)}
	for _, o := range opts {
		o(s)
	}
	if s.rand == nil {
		return nil, fmt.Errorf("rediscache: %w: random source", ErrNilDependency)
	}
	return s, nil
}

// Get returns the entry at key with its observation token, or false on a
// miss. It reads at most the header plus cache.MaxValueLen bytes.
func (s *Store) Get(ctx context.Context, key cache.Key) (cache.Entry, bool, error) {
	k, err := s.physical(key)
	if err != nil {
		return cache.Entry{}, false, fmt.Errorf("rediscache: get: %w", err)
	}
	// GETRANGE's end is inclusive: one byte more than a valid entry can hold
	// reveals an over-long foreign string without reading all of it.
	raw, err := s.c.GetRange(ctx, k, 0, int64(maxStoredLen)).Bytes()
	if errors.Is(err, redis.Nil) || err == nil && len(raw) == 0 {
		// GETRANGE answers "" for a missing key; no entry is ever empty.
		return cache.Entry{}, false, nil
	}
	if err != nil {
		return cache.Entry{}, false, fmt.Errorf("rediscache: get: %w", err)
	}
	e, err := decodeEntry(raw)
	if err != nil {
		return cache.Entry{}, false, fmt.Errorf("rediscache: get: %w", err)
	}
	return e, true, nil
}

// Set stores value under key with a fresh version and PEXPIRE ttl.
func (s *Store) Set(ctx context.Context, key cache.Key, value []byte, ttl time.Duration) error {
	k, stored, err := s.prepareWrite(key, nil, value, ttl)
	if err != nil {
		return fmt.Errorf("rediscache: set: %w", err)
	}
	st, err := s.c.Set(ctx, k, stored, ttl).Result()
	if err != nil {
		return fmt.Errorf("rediscache: set: %w", err)
	}
	if st != "OK" {
		return fmt.Errorf("rediscache: set: %w: status %s", ErrUnexpectedReply, boundedReply(st))
	}
	return nil
}

// SetIfAbsent stores value (fresh version, PEXPIRE ttl) only if key holds
// nothing, atomically (SET NX PX), and reports whether it stored.
func (s *Store) SetIfAbsent(ctx context.Context, key cache.Key, value []byte, ttl time.Duration) (bool, error) {
	k, stored, err := s.prepareWrite(key, nil, value, ttl)
	if err != nil {
		return false, fmt.Errorf("rediscache: set if absent: %w", err)
	}
	ok, err := s.c.SetNX(ctx, k, stored, ttl).Result()
	if err != nil {
		return false, fmt.Errorf("rediscache: set if absent: %w", err)
	}
	return ok, nil
}

// CompareAndReplace stores value (fresh version, PEXPIRE ttl) only if key
// still holds the write token was observed on, atomically in one script, and
// reports whether it stored. A token that no Store could have returned is
// rejected with cache.ErrInvalidToken before Redis is touched.
func (s *Store) CompareAndReplace(ctx context.Context, key cache.Key, token cache.Token, value []byte, ttl time.Duration) (bool, error) {
	k, stored, err := s.prepareWrite(key, &token, value, ttl)
	if err != nil {
		return false, fmt.Errorf("rediscache: compare and replace: %w", err)
	}
	n, err := s.car.run(ctx, s.c, []string{k}, string(token), stored, ttl.Milliseconds())
	if err != nil {
		return false, fmt.Errorf("rediscache: compare and replace: %w", err)
	}
	switch n {
	case carReplaced:
		return true, nil
	case carNotReplaced:
		return false, nil
	case carWrongType:
		return false, fmt.Errorf("rediscache: compare and replace: %w: key holds a non-string type", ErrMalformedEntry)
	case carInvalid:
		return false, fmt.Errorf("rediscache: compare and replace: %w: script rejected arguments the store validated", ErrUnexpectedReply)
	default:
		return false, fmt.Errorf("rediscache: compare and replace: %w: script replied %d", ErrUnexpectedReply, n)
	}
}

// Delete removes key; a missing key is not an error.
func (s *Store) Delete(ctx context.Context, key cache.Key) error {
	k, err := s.physical(key)
	if err != nil {
		return fmt.Errorf("rediscache: delete: %w", err)
	}
	n, err := s.c.Del(ctx, k).Result()
	if err != nil {
		return fmt.Errorf("rediscache: delete: %w", err)
	}
	if n < 0 || n > 1 {
		return fmt.Errorf("rediscache: delete: %w: DEL of one key replied %d", ErrUnexpectedReply, n)
	}
	return nil
}

// physical validates key and derives its physical key. Errors wrap
// cache.ErrInvalidKey and never contain key.Name.
func (s *Store) physical(key cache.Key) (string, error) {
	if err := key.Validate(); err != nil {
		return "", err
	}
	k, err := s.keys.Key(Capability, key.Region, key.Kind, key.Name)
	if err != nil {
		return "", fmt.Errorf("%w: %w", cache.ErrInvalidKey, err)
	}
	return k, nil
}

// prepareWrite validates every input of a write (key, token when non-nil,
// value, ttl), reporting all violations at once, and returns the physical key
// and the stored string under a fresh version.
func (s *Store) prepareWrite(key cache.Key, token *cache.Token, value []byte, ttl time.Duration) (string, []byte, error) {
	k, kerr := s.physical(key)
	var terr error
	if token != nil {
		_, terr = parseToken(*token)
	}
	if err := errors.Join(kerr, terr, cache.ValidateValue(value), cache.ValidateTTL(ttl)); err != nil {
		return "", nil, err
	}
	h, err := newHeader(s.rand)
	if err != nil {
		return "", nil, err
	}
	return k, encodeEntry(h, value), nil
}
