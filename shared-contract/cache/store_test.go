package cache_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/shared-contract/cache"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// nameMarker stands for a user identifier used as a cache name; it must
// never show up in an error.
const nameMarker = "user-alice@example.com"

func TestKeyValidate(t *testing.T) {
	long := strings.Repeat(nameMarker, cache.MaxNameLen/len(nameMarker)+1)
	tests := []struct {
		name string
		key  cache.Key
		ok   bool
	}{
		{"valid", cache.Key{Region: "sessions", Kind: "entry", Name: nameMarker}, true},
		{"name of 1 byte", cache.Key{Region: "r", Kind: "k", Name: "x"}, true},
		{"name of MaxNameLen", cache.Key{Region: "r", Kind: "k", Name: long[:cache.MaxNameLen]}, true},
		{"segments of 64", cache.Key{Region: strings.Repeat("r", 64), Kind: strings.Repeat("k", 64), Name: "x"}, true},
		{"name empty", cache.Key{Region: "r", Kind: "k", Name: ""}, false},
		{"name of MaxNameLen+1", cache.Key{Region: "r", Kind: "k", Name: long[:cache.MaxNameLen+1]}, false},
		{"region empty", cache.Key{Region: "", Kind: "k", Name: nameMarker}, false},
		{"region 65", cache.Key{Region: strings.Repeat("r", 65), Kind: "k", Name: nameMarker}, false},
		{"region uppercase", cache.Key{Region: "Sessions", Kind: "k", Name: nameMarker}, false},
		{"region colon", cache.Key{Region: "a:b", Kind: "k", Name: nameMarker}, false},
		{"kind leading dot", cache.Key{Region: "r", Kind: ".k", Name: nameMarker}, false},
		{"kind empty", cache.Key{Region: "r", Kind: "", Name: nameMarker}, false},
		{"zero key", cache.Key{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.key.Validate()
			if tt.ok {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, cache.ErrInvalidKey)
			assert.NotContains(t, err.Error(), nameMarker, "error leaks the name")
		})
	}
	t.Run("every violation reported", func(t *testing.T) {
		err := cache.Key{}.Validate()
		require.Error(t, err)
		for _, part := range []string{"region", "kind", "name"} {
			assert.Contains(t, err.Error(), part)
		}
	})
}

func TestValidateTTL(t *testing.T) {
	tests := []struct {
		ttl time.Duration
		ok  bool
	}{
		{time.Millisecond, true},
		{time.Second, true},
		{cache.MaxTTL, true},
		{cache.MaxTTL - time.Millisecond, true},
		{0, false},
		{-time.Millisecond, false},
		{999 * time.Microsecond, false},
		{time.Nanosecond, false},
		{time.Millisecond + time.Nanosecond, false},
		{1500 * time.Microsecond, false},
		{cache.MaxTTL + time.Millisecond, false},
		{cache.MaxTTL + time.Nanosecond, false},
		{time.Duration(1<<63 - 1), false},
	}
	for _, tt := range tests {
		t.Run(tt.ttl.String(), func(t *testing.T) {
			err := cache.ValidateTTL(tt.ttl)
			if tt.ok {
				assert.NoError(t, err)
			} else {
				assert.ErrorIs(t, err, cache.ErrInvalidTTL)
			}
		})
	}
	assert.Equal(t, 30*24*time.Hour, cache.MaxTTL)
}

func TestValidateValue(t *testing.T) {
	tests := []struct {
		name string
		v    []byte
		ok   bool
	}{
		{"nil", nil, true},
		{"empty", []byte{}, true},
		{"one byte", []byte{0}, true},
		{"MaxValueLen", make([]byte, cache.MaxValueLen), true},
		{"MaxValueLen+1", make([]byte, cache.MaxValueLen+1), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := cache.ValidateValue(tt.v)
			if tt.ok {
				assert.NoError(t, err)
			} else {
				assert.ErrorIs(t, err, cache.ErrInvalidValue)
			}
		})
	}
}

func TestTokenValidate(t *testing.T) {
	secretish := strings.Repeat("t0ken", 60)
	assert.NoError(t, cache.Token("1").Validate())
	assert.NoError(t, cache.Token(secretish[:cache.MaxTokenLen]).Validate())
	for _, tok := range []cache.Token{"", cache.Token(secretish[:cache.MaxTokenLen+1])} {
		err := tok.Validate()
		assert.ErrorIs(t, err, cache.ErrInvalidToken)
		if tok != "" {
			assert.NotContains(t, err.Error(), string(tok))
		}
	}
}

// TestPortsAreDistinct: the cache port and the rate-limit port share no
// method set, so a cache decorator (fail-open) cannot stand in for an
// EdgePort, and the reverse.
func TestPortsAreDistinct(t *testing.T) {
	var s cache.Store = storeOnly{}
	_, isEdge := any(s).(ratelimit.EdgePort)
	assert.False(t, isEdge)
	var e ratelimit.EdgePort = edgeOnly{}
	_, isStore := any(e).(cache.Store)
	assert.False(t, isStore)
	errs := []error{cache.ErrInvalidKey, cache.ErrInvalidTTL, cache.ErrInvalidValue, cache.ErrInvalidToken}
	for i, a := range errs {
		for j, b := range errs {
			assert.Equal(t, i == j, errors.Is(a, b))
		}
	}
}

type storeOnly struct{}

func (storeOnly) Get(context.Context, cache.Key) (cache.Entry, bool, error) {
	return cache.Entry{}, false, nil
}
func (storeOnly) Set(context.Context, cache.Key, []byte, time.Duration) error { return nil }
func (storeOnly) SetIfAbsent(context.Context, cache.Key, []byte, time.Duration) (bool, error) {
	return false, nil
}
func (storeOnly) CompareAndReplace(context.Context, cache.Key, cache.Token, []byte, time.Duration) (bool, error) {
	return false, nil
}
func (storeOnly) Delete(context.Context, cache.Key) error { return nil }

type edgeOnly struct{}

func (edgeOnly) Evaluate(context.Context, ratelimit.Request) ratelimit.Outcome {
	return ratelimit.Unavailable{Category: ratelimit.CategoryClosed}
}

func (edgeOnly) EvaluateSet(context.Context, ratelimit.SetRequest) ratelimit.Outcome {
	return ratelimit.Unavailable{Category: ratelimit.CategoryClosed}
}

func (edgeOnly) Refund(context.Context, ratelimit.Request, ratelimit.Receipt) ratelimit.Outcome {
	return ratelimit.Unavailable{Category: ratelimit.CategoryClosed}
}
