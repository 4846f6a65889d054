package cache

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tech-log/tech-log-backend/shared-contract/keyspace"
)

// Bounds on cache inputs.
const (
	// MaxTTL is the longest accepted TTL.
	MaxTTL = 30 * 24 * time.Hour
	// MaxValueLen is the largest accepted value, in bytes.
	MaxValueLen = 1 << 20
	// MaxNameLen is the longest accepted Key.Name, in bytes.
	MaxNameLen = keyspace.MaxFieldLen
	// MaxTokenLen is the longest accepted observation Token, in bytes.
	MaxTokenLen = 256
)

// Errors for invalid input; a Store returns them (wrapped) before touching
// the backend.
var (
	ErrInvalidKey   = errors.New("invalid cache key")
	ErrInvalidTTL   = errors.New("invalid cache ttl")
	ErrInvalidValue = errors.New("invalid cache value")
	ErrInvalidToken = errors.New("invalid observation token")
)

// Key is a logical cache key. Region and Kind are key segments
// ([a-z0-9][a-z0-9._-]*, at most 64 bytes); Name is any identifier of 1 to
// MaxNameLen bytes and only ever appears digested in the physical key (it may
// identify a user, so it never appears in an error or log line either).
type Key struct {
	Region string
	Kind   string
	Name   string
}

// Validate reports whether k can be stored. The error never contains Name.
func (k Key) Validate() error {
	var errs []error
	if !keyspace.IsSegment(k.Region) {
		errs = append(errs, fmt.Errorf("%w: region %q must be a key segment", ErrInvalidKey, k.Region))
	}
	if !keyspace.IsSegment(k.Kind) {
		errs = append(errs, fmt.Errorf("%w: kind %q must be a key segment", ErrInvalidKey, k.Kind))
	}
	if len(k.Name) == 0 || len(k.Name) > MaxNameLen {
		errs = append(errs, fmt.Errorf("%w: name is %d bytes, want 1..%d", ErrInvalidKey, len(k.Name), MaxNameLen))
	}
	return errors.Join(errs...)
}

// ValidateTTL reports whether ttl is finite: whole milliseconds in
// 1ms..MaxTTL.
func ValidateTTL(ttl time.Duration) error {
	if ttl < time.Millisecond || ttl > MaxTTL || ttl%time.Millisecond != 0 {
		return fmt.Errorf("%w: ttl %v must be whole milliseconds in 1ms..%v", ErrInvalidTTL, ttl, MaxTTL)
	}
	return nil
}

// ValidateValue reports whether v is at most MaxValueLen bytes. An empty (or
// nil) value is valid.
func ValidateValue(v []byte) error {
	if len(v) > MaxValueLen {
		return fmt.Errorf("%w: value is %d bytes, max %d", ErrInvalidValue, len(v), MaxValueLen)
	}
	return nil
}

// Token is an opaque observation token: it identifies one stored version of
// a value. It is only meaningful to the Store that returned it.
type Token string

// Validate reports whether t can be passed to CompareAndReplace: 1 to
// MaxTokenLen bytes. The error does not contain the token.
func (t Token) Validate() error {
	if len(t) == 0 || len(t) > MaxTokenLen {
		return fmt.Errorf("%w: token is %d bytes, want 1..%d", ErrInvalidToken, len(t), MaxTokenLen)
	}
	return nil
}

// Entry is a value read from the cache with its observation token.
type Entry struct {
	Value []byte
	Token Token
}

// Store is a cache. Implementations are safe for concurrent use. Every write
// takes a finite TTL (see ValidateTTL); invalid input is rejected before the
// backend is touched.
type Store interface {
	// Get returns the entry and true, or false on a miss (a zero Entry).
	Get(ctx context.Context, key Key) (Entry, bool, error)
	// Set stores value unconditionally.
	Set(ctx context.Context, key Key, value []byte, ttl time.Duration) error
	// SetIfAbsent stores value only if key holds nothing; it reports whether
	// it stored.
	SetIfAbsent(ctx context.Context, key Key, value []byte, ttl time.Duration) (bool, error)
	// CompareAndReplace stores value only if key still holds the version
	// token was observed on; it reports whether it stored.
	CompareAndReplace(ctx context.Context, key Key, token Token, value []byte, ttl time.Duration) (bool, error)
	// Delete removes key; deleting a missing key is not an error.
	Delete(ctx context.Context, key Key) error
}
