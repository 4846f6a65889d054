package rediscache

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tech-log/tech-log-backend/shared-contract/cache"
)

func TestScalarScriptNoScriptFallback(t *testing.T) {
	s := newScalarScript("t", "return 1")
	ctx := context.Background()
	noScript := serverErr("NOSCRIPT No matching script. Please use EVAL.")
	again := serverErr("NOSCRIPT again")
	busy := serverErr("BUSY Redis is busy running a script")
	oom := serverErr("OOM command not allowed when used memory > 'maxmemory'.")
	timeout := errors.New("read tcp 127.0.0.1:1: i/o timeout")
	lookalike := fmt.Errorf("wrapped: NOSCRIPT") // not a server reply
	tests := []struct {
		name      string
		evalsha   reply
		eval      reply
		wantCalls []string
		want      int64
		wantErr   error
	}{
		{"evalsha ok", reply{val: int64(5)}, reply{}, []string{"evalsha"}, 5, nil},
		{"negative reply", reply{val: int64(-2)}, reply{}, []string{"evalsha"}, -2, nil},
		{"noscript then one eval", reply{err: noScript}, reply{val: int64(3)}, []string{"evalsha", "eval"}, 3, nil},
		{"noscript then eval error is returned, not retried", reply{err: noScript}, reply{err: again}, []string{"evalsha", "eval"}, 0, again},
		{"busy: no eval", reply{err: busy}, reply{}, []string{"evalsha"}, 0, busy},
		{"oom: no eval", reply{err: oom}, reply{}, []string{"evalsha"}, 0, oom},
		{"transport error: no eval", reply{err: timeout}, reply{}, []string{"evalsha"}, 0, timeout},
		{"non-reply error mentioning NOSCRIPT: no eval", reply{err: lookalike}, reply{}, []string{"evalsha"}, 0, lookalike},
		{"string reply", reply{val: "1"}, reply{}, []string{"evalsha"}, 0, ErrUnexpectedReply},
		{"array reply after fallback", reply{err: noScript}, reply{val: []any{int64(1)}}, []string{"evalsha", "eval"}, 0, ErrUnexpectedReply},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake()
			f.answer("evalsha", tt.evalsha)
			f.answer("eval", tt.eval)
			n, err := s.run(ctx, f, []string{"k"}, "a", int64(2))
			assert.Equal(t, tt.wantCalls, f.callNames())
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
			} else {
				require.NoError(t, err)
				assert.Equal(t, tt.want, n)
			}
			for _, c := range f.calls {
				switch c.name {
				case "evalsha":
					assert.Equal(t, []any{s.script.Hash(), "a", int64(2)}, c.args)
				case "eval":
					assert.Equal(t, []any{"return 1", "a", int64(2)}, c.args, "EVAL sends the exact source")
				}
				assert.Equal(t, "k", c.key)
			}
		})
	}
}

func TestBoundedReply(t *testing.T) {
	assert.LessOrEqual(t, len(boundedReply(strings.Repeat("x", 1<<20))), 67)
	assert.Equal(t, `int64(7)`, boundedReply(int64(7)))
}

func TestScalarScriptSHA(t *testing.T) {
	sum := sha1.Sum([]byte(compareAndReplaceSource))
	s := newScalarScript("car", compareAndReplaceSource)
	assert.Equal(t, hex.EncodeToString(sum[:]), s.script.Hash())
}

// TestCompareAndReplaceScriptMatchesGo: the constants in the script's source
// are the Go side's, so a change to one without the other fails here.
func TestCompareAndReplaceScriptMatchesGo(t *testing.T) {
	src := compareAndReplaceSource
	require.True(t, strings.HasPrefix(src, "#!lua\n"), "shebang: OOM/READONLY are refused before the script runs")
	consts := map[string]int64{
		"HEADER_LEN":    int64(headerLen),
		"MAX_VALUE_LEN": cache.MaxValueLen,
		"MAX_TTL_MS":    cache.MaxTTL.Milliseconds(),
		"REPLACED":      carReplaced,
		"NOT_REPLACED":  carNotReplaced,
		"INVALID":       carInvalid,
		"WRONG_TYPE":    carWrongType,
	}
	for name, want := range consts {
		m := regexp.MustCompile(`(?m)^local ` + name + ` = (-?[0-9]+)$`).FindStringSubmatch(src)
		require.NotNil(t, m, "script declares %s", name)
		got, err := strconv.ParseInt(m[1], 10, 64)
		require.NoError(t, err)
		assert.Equal(t, want, got, name)
	}
	assert.Contains(t, src, "'^"+layoutTag+"[0-9a-f]+$'", "script checks the %s header", layoutTag)
	// Every write happens after every read and check: exactly one write, last.
	assert.Equal(t, 1, strings.Count(src, "redis.call("), "exactly one write command")
	assert.Greater(t, strings.Index(src, "redis.call('SET'"), strings.Index(src, "GETRANGE"))
	assert.Contains(t, src, "'PX', ttl", "the write carries its TTL")
}
