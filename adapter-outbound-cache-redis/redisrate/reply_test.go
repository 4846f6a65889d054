package redisrate

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/programs"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

func ints(v ...int64) []any {
	out := make([]any, len(v))
	for i, n := range v {
		out[i] = n
	}
	return out
}

func TestParseReplyRejectsEveryMalformedShape(t *testing.T) {
	p := fixedPolicy(t, "fw", 5, time.Minute)
	good := modelReply(p, t0, 1)
	withElem := func(i int, v any) []any {
		r := append([]any(nil), good...)
		r[i] = v
		return r
	}
	now := t0.UnixMilli()
	tests := []struct {
		name  string
		reply any
		check bool // rejected by Reply.Check rather than the shape check
	}{
		{"nil", nil, false},
		{"status string", "OK", false},
		{"bulk digits", "1", false},
		{"bytes", []byte("1"), false},
		{"bare integer", int64(1), false},
		{"float", 1.5, false},
		{"bool", true, false},
		{"map", map[any]any{"status": int64(1)}, false},
		{"string map", map[string]any{"status": int64(1)}, false},
		{"empty array", []any{}, false},
		{"six integers", good[:6], false},
		{"eight integers", append(append([]any(nil), good...), int64(0)), false},
		{"string element", withElem(0, "1"), false},
		{"bulk digits element", withElem(4, "4"), false},
		{"float element", withElem(4, 4.0), false},
		{"int element (not int64)", withElem(4, 4), false},
		{"nil element", withElem(2, nil), false},
		{"nested array", withElem(3, []any{int64(5)}), false},
		{"bool element", withElem(0, true), false},
		{"error element", withElem(0, errors.New("x")), false},
		{"negative", withElem(4, int64(-1)), false},
		{"above 2^53-1", withElem(1, ratelimit.MaxExactInt+1), false},
		{"status zero", withElem(0, int64(0)), false},
		{"status six", withElem(0, int64(6)), false},
		{"remaining above limit", withElem(4, int64(6)), true},
		{"limit differs from policy", withElem(3, int64(6)), true},
		{"allowed with retry", withElem(5, int64(1)), true},
		{"effective now behind server now", ints(1, now, now-1, 5, 4, 0, (now/60000+1)*60000), true},
		{"effective now beyond regression", ints(1, now, now+2001, 5, 4, 0, ((now+2001)/60000+1)*60000), true},
		{"reset not the window end", withElem(6, now+1), true},
		{"server time beyond bound", ints(4, ratelimit.MaxServerMillis+1, 0, 0, 0, 0, 0), true},
		{"state incompatible with fields", ints(4, now, 0, 5, 0, 0, 0), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := parseReply(tt.reply, p)
			require.Error(t, err)
			assert.Equal(t, programs.Reply{}, r)
			assert.ErrorIs(t, err, ErrMalformedReply)
			var re *ReplyError
			require.ErrorAs(t, err, &re)
			assert.NotEmpty(t, re.Reply, "the offending reply is rendered")
			assert.LessOrEqual(t, len(re.Reply), maxRenderLen+3)
			if tt.check {
				assert.ErrorIs(t, err, programs.ErrMalformedReply, "the consistency check's own error is kept")
			}
		})
	}
}

func TestParseReplyAcceptsEveryStatus(t *testing.T) {
	now := t0.UnixMilli()
	for _, p := range testPolicies(t) {
		t.Run(p.Algorithm().String(), func(t *testing.T) {
			var st programs.State
			var seen [programs.StatusInvalid + 1]bool
			for i := 0; i < 8; i++ { // allowed until the limit, then denied
				want, next := programs.Evaluate(p, st, now, 1)
				st = next
				got, err := parseReply(modelReplyOf(want), p)
				require.NoError(t, err)
				assert.Equal(t, want, got)
				seen[want.Status] = true
			}
			assert.True(t, seen[programs.StatusAllowed] && seen[programs.StatusDenied])
			for _, r := range []programs.Reply{
				{Status: programs.StatusClockUnsafe},
				{Status: programs.StatusClockUnsafe, ServerNowMillis: now, EffectiveNowMillis: now + 5000, RetryAfterMillis: 3000},
				{Status: programs.StatusStateIncompatible, ServerNowMillis: now},
				{Status: programs.StatusInvalid, ServerNowMillis: now},
			} {
				got, err := parseReply(modelReplyOf(r), p)
				require.NoError(t, err, "%+v", r)
				assert.Equal(t, r, got)
			}
		})
	}
}

func modelReplyOf(r programs.Reply) []any {
	v := r.Ints()
	return ints(v[:]...)
}

func TestParseReplyDoesNotAllocate(t *testing.T) {
	p := tokenPolicy(t, "tb", 5, 1, time.Second)
	var reply any = modelReply(p, t0, 1) // go-redis hands the reply over as an any
	allocs := testing.AllocsPerRun(200, func() {
		if _, err := parseReply(reply, p); err != nil {
			t.Fatal(err)
		}
	})
	assert.Zero(t, allocs)
}

func TestRenderIsBounded(t *testing.T) {
	huge := strings.Repeat("x", 1<<20)
	long := make([]any, 100_000)
	for i := range long {
		long[i] = int64(i)
	}
	deep := any(int64(1))
	for i := 0; i < 100; i++ {
		deep = []any{deep}
	}
	for name, v := range map[string]any{
		"huge bulk": huge, "huge bytes": []byte(huge), "long array": long, "deep": deep,
		"array of huge": []any{huge, huge, huge, huge, huge, huge, huge},
	} {
		t.Run(name, func(t *testing.T) {
			s := render(v)
			assert.LessOrEqual(t, len(s), maxRenderLen+3)
			assert.NotEmpty(t, s)
		})
	}
	assert.Equal(t, `[]interface {}{int64(1), "OK", <nil>}`, render([]any{int64(1), "OK", nil}))
}

func BenchmarkParseReply(b *testing.B) {
	p := tokenPolicy(b, "tb", 5, 1, time.Second)
	var reply any = modelReply(p, t0, 1)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := parseReply(reply, p); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzParseReply: whatever the shape, parseReply never panics and accepts
// only exactly seven in-range integers that pass Reply.Check.
func FuzzParseReply(f *testing.F) {
	now := t0.UnixMilli()
	f.Add(uint8(0), int64(1), now, now, int64(5), int64(4), int64(0), (now/60000+1)*60000)
	f.Add(uint8(1), int64(2), now, now, int64(5), int64(0), int64(10), (now/60000+1)*60000)
	f.Add(uint8(2), int64(7), int64(-1), int64(0), int64(0), int64(0), int64(0), int64(0))
	f.Add(uint8(3), int64(1), int64(1), int64(1), int64(1), int64(1), int64(1), int64(1))
	policy := fixedPolicy(f, "fw", 5, time.Minute)
	f.Fuzz(func(t *testing.T, shape uint8, a, b, c, d, e, g, h int64) {
		v := []int64{a, b, c, d, e, g, h}
		var reply any
		switch shape % 6 {
		case 0:
			reply = ints(v...)
		case 1:
			reply = ints(v[:int(uint64(a)%7)]...)
		case 2:
			r := ints(v...)
			r[int(uint64(b)%7)] = "1"
			reply = r
		case 3:
			r := ints(v...)
			r[int(uint64(c)%7)] = float64(d)
			reply = r
		case 4:
			reply = append(ints(v...), int64(0))
		case 5:
			reply = []any{ints(v...)}
		}
		r, err := parseReply(reply, policy)
		if err != nil {
			assert.ErrorIs(t, err, ErrMalformedReply)
			return
		}
		require.Equal(t, uint8(0), shape%6, "only a flat array of 7 integers is accepted")
		require.NoError(t, r.Check(policy))
		assert.Equal(t, [programs.ReplyLen]int64(v), r.Ints())
	})
}
