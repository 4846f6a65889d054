package rediscache

import (
	"context"
	"crypto/sha1"
	_ "embed"
	"encoding/hex"
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

// scripter is the part of go-redis the scalar executor uses.
type scripter interface {
	EvalSha(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd
	Eval(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd
}

// scalarScript runs one embedded Lua program whose reply is a single
// integer. It sends EVALSHA and, only when the server answers NOSCRIPT (the
// script provably did not run), exactly one EVAL of the exact source; any
// other error is returned as is, never retried. It is deliberately separate
// from the rate-limit programs' structured executor.
type scalarScript struct {
	name string
	src  string
	sha  string
}

func newScalarScript(name, src string) *scalarScript {
	sum := sha1.Sum([]byte(src))
	return &scalarScript{name: name, src: src, sha: hex.EncodeToString(sum[:])}
}

// run evaluates the script and returns its integer reply. A reply that is
// not an integer (or a nil reply) is an error wrapping ErrUnexpectedReply.
func (s *scalarScript) run(ctx context.Context, c scripter, keys []string, args ...any) (int64, error) {
	v, err := c.EvalSha(ctx, s.sha, keys, args...).Result()
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		v, err = c.Eval(ctx, s.src, keys, args...).Result()
	}
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
