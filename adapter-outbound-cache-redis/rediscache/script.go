package rediscache

import (
	"context"
	_ "embed"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

//go:embed compare_and_replace.lua
var compareAndReplaceSource string

// compare_and_replace.lua replies; the script declares the same values.
const (
	carReplaced    int64 = 1
	carNotReplaced int64 = 0
	carInvalid     int64 = -1
	carWrongType   int64 = -2
)

// scalarScript runs one embedded Lua program whose reply is a single
// integer, through go-redis's redis.Script: EVALSHA and, only when the
// server answers NOSCRIPT (the script provably did not run), exactly one
// EVAL of the exact source; any other error is returned as is, never
// retried. The cache tracks no failure certainty, so it needs nothing of
// the rate-limit programs' structured executor.
type scalarScript struct {
	name   string
	script *redis.Script
}

func newScalarScript(name, src string) *scalarScript {
	return &scalarScript{name: name, script: redis.NewScript(src)}
}

// run evaluates the script and returns its integer reply. A reply that is
// not an integer (or a nil reply) is an error wrapping ErrUnexpectedReply.
func (s *scalarScript) run(ctx context.Context, c redis.Scripter, keys []string, args ...any) (int64, error) {
	v, err := s.script.Run(ctx, c, keys, args...).Result()
	if errors.Is(err, redis.Nil) {
		return 0, fmt.Errorf("%w: script %s replied nil, want an integer", ErrUnexpectedReply, s.name)
	}
	if err != nil {
		return 0, fmt.Errorf("script %s: %w", s.name, err)
	}
	n, ok := v.(int64)
	if !ok {
		return 0, fmt.Errorf("%w: script %s replied %s, want an integer", ErrUnexpectedReply, s.name, boundedReply(v))
	}
	return n, nil
}

// boundedReply formats an unexpected reply for an error, at most 64 bytes
// of it.
func boundedReply(v any) string {
	const max = 64
	s := fmt.Sprintf("%T(%#v)", v, v)
	if len(s) > max {
		s = s[:max] + "..."
	}
	return s
}
