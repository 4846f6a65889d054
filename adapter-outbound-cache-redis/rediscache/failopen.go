package rediscache

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tech-log/tech-log-backend/shared-contract/cache"
)

// Operation names passed to FailOpen's failure callback; stable, usable as
// metric label values.
const (
	OpGet               = "get"
	OpSet               = "set"
	OpSetIfAbsent       = "set_if_absent"
	OpCompareAndReplace = "compare_and_replace"
	OpDelete            = "delete"
)

// FailOpen is a cache.Store that never lets a backend failure reach the
// caller: a failed Get is a miss, a failed SetIfAbsent or CompareAndReplace
// reports false, a failed Set or Delete is a no-op, and each failure is
// reported to the callback. Invalid input (errors wrapping
// cache.ErrInvalidKey, ErrInvalidTTL, ErrInvalidValue or ErrInvalidToken) is
// a caller bug and is returned unchanged, uncounted.
//
// It wraps a cache.Store only. Rate-limit coordination (ratelimit.EdgePort)
// is a different type and must fail closed, so it cannot be wrapped.
// Safe for concurrent use if the inner Store and the callback are.
type FailOpen struct {
	inner     cache.Store
	onFailure func(op string, err error)
}

var _ cache.Store = (*FailOpen)(nil)

// NewFailOpen wraps inner. onFailure receives the operation name (OpGet...)
// and the swallowed error, for counting; it must be fast and must not log
// the error's text at a level that could carry secrets. Wrapping a FailOpen
// again is rejected: the failures would be counted twice.
func NewFailOpen(inner cache.Store, onFailure func(op string, err error)) (*FailOpen, error) {
	if inner == nil {
		return nil, fmt.Errorf("rediscache: fail open: %w: inner store", ErrNilDependency)
	}
	if onFailure == nil {
		return nil, fmt.Errorf("rediscache: fail open: %w: failure callback", ErrNilDependency)
	}
	if _, ok := inner.(*FailOpen); ok {
		return nil, errors.New("rediscache: fail open: inner store is already fail-open")
	}
	return &FailOpen{inner: inner, onFailure: onFailure}, nil
}

// Get returns the inner entry, or a miss if the backend failed.
func (f *FailOpen) Get(ctx context.Context, key cache.Key) (cache.Entry, bool, error) {
	e, ok, err := f.inner.Get(ctx, key)
	if err != nil {
		return cache.Entry{}, false, f.swallow(OpGet, err)
	}
	return e, ok, nil
}

// Set stores through the inner store; a backend failure is a counted no-op.
func (f *FailOpen) Set(ctx context.Context, key cache.Key, value []byte, ttl time.Duration) error {
	return f.swallow(OpSet, f.inner.Set(ctx, key, value, ttl))
}

// SetIfAbsent stores through the inner store; a backend failure reports false.
func (f *FailOpen) SetIfAbsent(ctx context.Context, key cache.Key, value []byte, ttl time.Duration) (bool, error) {
	ok, err := f.inner.SetIfAbsent(ctx, key, value, ttl)
	if err != nil {
		return false, f.swallow(OpSetIfAbsent, err)
	}
	return ok, nil
}

// CompareAndReplace replaces through the inner store; a backend failure
// reports false.
func (f *FailOpen) CompareAndReplace(ctx context.Context, key cache.Key, token cache.Token, value []byte, ttl time.Duration) (bool, error) {
	ok, err := f.inner.CompareAndReplace(ctx, key, token, value, ttl)
	if err != nil {
		return false, f.swallow(OpCompareAndReplace, err)
	}
	return ok, nil
}

// Delete deletes through the inner store; a backend failure is a counted
// no-op (the entry then expires by its TTL).
func (f *FailOpen) Delete(ctx context.Context, key cache.Key) error {
	return f.swallow(OpDelete, f.inner.Delete(ctx, key))
}

// swallow returns err if it is invalid input, and otherwise counts it and
// returns nil.
func (f *FailOpen) swallow(op string, err error) error {
	if err == nil {
		return nil
	}
	if IsInvalidInput(err) {
		return err
	}
	f.onFailure(op, err)
	return nil
}

// IsInvalidInput reports whether err is a cache input error (a caller bug)
// rather than a backend failure.
func IsInvalidInput(err error) bool {
	return errors.Is(err, cache.ErrInvalidKey) || errors.Is(err, cache.ErrInvalidTTL) ||
		errors.Is(err, cache.ErrInvalidValue) || errors.Is(err, cache.ErrInvalidToken)
}
