package rediscache

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/tech-log/tech-log-backend/shared-contract/keyspace"
)

// call is one command the fake received.
type call struct {
	name  string
	key   string
	args  []any
	ttl   time.Duration
	start int64
	end   int64
}

// reply is what the fake answers to one command.
type reply struct {
	val any
	err error
}

// fakeRedis implements rediser, records every call and answers from a
// per-command queue (an empty queue answers the zero value).
type fakeRedis struct {
	mu      sync.Mutex
	calls   []call
	replies map[string][]reply
}

func newFake() *fakeRedis { return &fakeRedis{replies: map[string][]reply{}} }

func (f *fakeRedis) answer(name string, r reply) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.replies[name] = append(f.replies[name], r)
}

func (f *fakeRedis) record(c call) reply {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, c)
	q := f.replies[c.name]
	if len(q) == 0 {
		return reply{}
	}
	f.replies[c.name] = q[1:]
	return q[0]
}

func (f *fakeRedis) callNames() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	names := make([]string, len(f.calls))
	for i, c := range f.calls {
		names[i] = c.name
	}
	return names
}

func (f *fakeRedis) GetRange(ctx context.Context, key string, start, end int64) *redis.StringCmd {
	r := f.record(call{name: "getrange", key: key, start: start, end: end})
	cmd := redis.NewStringCmd(ctx)
	if s, ok := r.val.(string); ok {
		cmd.SetVal(s)
	}
	cmd.SetErr(r.err)
	return cmd
}

func (f *fakeRedis) Set(ctx context.Context, key string, value any, ttl time.Duration) *redis.StatusCmd {
	r := f.record(call{name: "set", key: key, args: []any{value}, ttl: ttl})
	cmd := redis.NewStatusCmd(ctx)
	if s, ok := r.val.(string); ok {
		cmd.SetVal(s)
	} else if r.err == nil {
		cmd.SetVal("OK")
	}
	cmd.SetErr(r.err)
	return cmd
}

func (f *fakeRedis) SetNX(ctx context.Context, key string, value any, ttl time.Duration) *redis.BoolCmd {
	r := f.record(call{name: "setnx", key: key, args: []any{value}, ttl: ttl})
	cmd := redis.NewBoolCmd(ctx)
	if b, ok := r.val.(bool); ok {
		cmd.SetVal(b)
	}
	cmd.SetErr(r.err)
	return cmd
}

func (f *fakeRedis) Del(ctx context.Context, keys ...string) *redis.IntCmd {
	r := f.record(call{name: "del", key: strings.Join(keys, ",")})
	cmd := redis.NewIntCmd(ctx)
	if n, ok := r.val.(int64); ok {
		cmd.SetVal(n)
	}
	cmd.SetErr(r.err)
	return cmd
}

func (f *fakeRedis) EvalSha(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	r := f.record(call{name: "evalsha", key: strings.Join(keys, ","), args: append([]any{sha}, args...)})
	cmd := redis.NewCmd(ctx)
	cmd.SetVal(r.val)
	cmd.SetErr(r.err)
	return cmd
}

func (f *fakeRedis) Eval(ctx context.Context, src string, keys []string, args ...any) *redis.Cmd {
	r := f.record(call{name: "eval", key: strings.Join(keys, ","), args: append([]any{src}, args...)})
	cmd := redis.NewCmd(ctx)
	cmd.SetVal(r.val)
	cmd.SetErr(r.err)
	return cmd
}

// EvalRO, EvalShaRO, ScriptExists and ScriptLoad complete redis.Scripter;
// the store never sends them.
func (f *fakeRedis) EvalRO(ctx context.Context, _ string, _ []string, _ ...any) *redis.Cmd {
	return f.unexpected(ctx, "eval_ro")
}

func (f *fakeRedis) EvalShaRO(ctx context.Context, _ string, _ []string, _ ...any) *redis.Cmd {
	return f.unexpected(ctx, "evalsha_ro")
}

func (f *fakeRedis) ScriptExists(ctx context.Context, _ ...string) *redis.BoolSliceCmd {
	f.record(call{name: "script exists"})
	cmd := redis.NewBoolSliceCmd(ctx)
	cmd.SetErr(errors.New("fake: SCRIPT EXISTS not expected"))
	return cmd
}

func (f *fakeRedis) ScriptLoad(ctx context.Context, _ string) *redis.StringCmd {
	f.record(call{name: "script load"})
	cmd := redis.NewStringCmd(ctx)
	cmd.SetErr(errors.New("fake: SCRIPT LOAD not expected"))
	return cmd
}

func (f *fakeRedis) unexpected(ctx context.Context, name string) *redis.Cmd {
	f.record(call{name: name})
	cmd := redis.NewCmd(ctx)
	cmd.SetErr(errors.New("fake: " + name + " not expected"))
	return cmd
}

var _ rediser = (*fakeRedis)(nil)

// serverErr is a Redis error reply as go-redis represents one.
type serverErr string

func (e serverErr) Error() string { return string(e) }
func (serverErr) RedisError()     {}

// testKeys returns a Builder under a fixed test secret.
func testKeys(t testing.TB) *keyspace.Builder {
	t.Helper()
	secret, err := keyspace.NewSecret([]byte("rediscache-test-secret-0123456789abcdef"))
	require.NoError(t, err)
	b, err := keyspace.NewBuilder(keyspace.DefaultPrefix, secret)
	require.NoError(t, err)
	return b
}
