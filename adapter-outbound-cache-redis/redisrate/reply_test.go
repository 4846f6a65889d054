package redisrate

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/big"
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
			r, err := programs.Decode(tt.reply, p)
			require.Error(t, err)
			assert.Equal(t, programs.Reply{}, r)
			assert.ErrorIs(t, err, programs.ErrMalformedReply)
			var re *programs.ReplyError
			require.ErrorAs(t, err, &re)
			assert.NotEmpty(t, re.Reply, "the offending reply is rendered")
			assert.LessOrEqual(t, len(re.Reply), 256+3)
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
				got, err := programs.Decode(modelReplyOf(want), p)
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
				got, err := programs.Decode(modelReplyOf(r), p)
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
		if _, err := programs.Decode(reply, p); err != nil {
			t.Fatal(err)
		}
	})
	assert.Zero(t, allocs)
}

func BenchmarkParseReply(b *testing.B) {
	p := tokenPolicy(b, "tb", 5, 1, time.Second)
	var reply any = modelReply(p, t0, 1)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := programs.Decode(reply, p); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzParseReply: whatever the shape, programs.Decode never panics and accepts
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
		r, err := programs.Decode(reply, policy)
		if err != nil {
			assert.ErrorIs(t, err, programs.ErrMalformedReply)
			return
		}
		require.Equal(t, uint8(0), shape%6, "only a flat array of 7 integers is accepted")
		require.NoError(t, r.Check(policy))
		assert.Equal(t, [programs.ReplyLen]int64(v), r.Ints())
	})
}

// fuzzValue decodes fuzz bytes into a value of any shape go-redis's RESP2
// and RESP3 readers return (nil, int64, string, float64, bool, *big.Int,
// a server error, []any, map[any]any), nested up to depth 3, with strings,
// arrays and maps of any size up to what the bytes allow. The first bytes
// favour a 7-element array of integers, so the valid path is reached too.
func fuzzValue(data []byte, depth int) (any, []byte) {
	if len(data) == 0 {
		return nil, nil
	}
	tag, data := data[0], data[1:]
	next := func(n int) []byte {
		n = min(n, len(data))
		b := data[:n]
		data = data[n:]
		return b
	}
	one := func() int {
		if b := next(1); len(b) == 1 {
			return int(b[0])
		}
		return 0
	}
	num := func() int64 {
		var b [8]byte
		copy(b[:], next(8))
		return int64(binary.LittleEndian.Uint64(b[:]))
	}
	switch tag % 12 {
	case 0:
		return nil, data
	case 1, 2:
		return num() % (ratelimit.MaxExactInt + 2), data // mostly in range
	case 3:
		return num(), data
	case 4:
		n := one() % 40
		return string(next(n)), data
	case 5:
		return float64(num()) / 3, data
	case 6:
		return num()%2 == 0, data
	case 7:
		return new(big.Int).Lsh(big.NewInt(num()), 70), data
	case 8:
		return serverError("ERR " + string(next(int(tag)%20))), data
	case 9, 10, 11:
		if depth >= 3 {
			return num(), data
		}
		n := programs.ReplyLen
		if tag%12 != 9 {
			n = one() % 12
		}
		if tag%12 == 11 {
			m := make(map[any]any, n)
			for i := 0; i < n && len(data) > 0; i++ {
				var k, v any
				k, data = fuzzValue(data, depth+1)
				v, data = fuzzValue(data, depth+1)
				if k == nil || isUnhashable(k) {
					k = i
				}
				m[k] = v
			}
			return m, data
		}
		arr := make([]any, n)
		for i := range arr {
			arr[i], data = fuzzValue(data, depth+1)
		}
		return arr, data
	}
	return nil, data
}

func isUnhashable(v any) bool {
	switch v.(type) {
	case []any, map[any]any:
		return true
	}
	return false
}

// FuzzParseReplyValue: for a reply value of any shape, through the whole
// provider (a fake client answers the program call with it), Evaluate never
// panics and admits exactly when the value is an array of seven int64 in
// 0..MaxExactInt with status ALLOWED that passes Reply.Check (an
// independent oracle); a valid DENIED is a denial with the same fields, and
// anything invalid is Incompatible{malformed_reply} whose cause wraps
// ErrMalformedReply with a bounded message.
func FuzzParseReplyValue(f *testing.F) {
	now := uint64(t0.UnixMilli())
	le := func(vals ...uint64) []byte {
		b := []byte{9}
		for _, v := range vals {
			b = append(b, 1)
			b = binary.LittleEndian.AppendUint64(b, v)
		}
		return b
	}
	reset := (now/60000 + 1) * 60000
	f.Add(le(1, now, now, 5, 4, 0, reset))
	f.Add(le(2, now, now, 5, 0, reset-now, reset))
	f.Add(le(6, now, now, 5, 4, 0, reset))
	f.Add([]byte{10, 3, 4, 3, 'a', 'b', 'c', 0, 5, 1, 2, 3, 7, 8})
	f.Add([]byte{11, 4, 1, 1, 0, 0, 0, 0, 0, 0, 0, 8, 8})
	f.Add([]byte{})
	policy := testPolicies(f)[0] // "fw": fixed window 5 per minute
	f.Fuzz(func(t *testing.T, data []byte) {
		v, _ := fuzzValue(data, 0)
		fc := &fakeCommander{respond: func(int, sentCommand) fakeReply { return fakeReply{val: v} }}
		p := fakeProvider(t, fc, 1)
		out := p.Evaluate(context.Background(), request(policy.ID(), subjectA, 1, t0))
		want, valid := oracleReply(v, policy)
		if !valid {
			require.False(t, ratelimit.Admitted(out), "admitted %s", fmt.Sprintf("%T", v))
			inc, ok := out.(ratelimit.Incompatible)
			require.True(t, ok, "%v for %s", out, fmt.Sprintf("%T", v))
			require.Equal(t, ratelimit.CategoryMalformedReply, inc.Category)
			require.ErrorIs(t, inc.Cause, programs.ErrMalformedReply)
			require.Less(t, len(inc.Cause.Error()), 1024, "bounded message")
			return
		}
		switch want.Status {
		case programs.StatusAllowed, programs.StatusDenied:
			ev, ok := out.(ratelimit.Evaluated)
			require.True(t, ok, "%v", out)
			require.Equal(t, want.Status == programs.StatusAllowed, ratelimit.Admitted(out))
			require.Equal(t, want.Remaining, ev.Decision.Remaining)
			require.Equal(t, want.Limit, ev.Decision.Limit)
		default:
			require.False(t, ratelimit.Admitted(out), "%v", out)
			require.NotEqual(t, ratelimit.KindEvaluated, out.Kind())
		}
	})
}

// oracleReply is programs.Decode's acceptance rule written out on its own.
func oracleReply(v any, p ratelimit.Policy) (programs.Reply, bool) {
	arr, ok := v.([]any)
	if !ok || len(arr) != programs.ReplyLen {
		return programs.Reply{}, false
	}
	var ints [programs.ReplyLen]int64
	for i, e := range arr {
		n, ok := e.(int64)
		if !ok || n < 0 || n > ratelimit.MaxExactInt {
			return programs.Reply{}, false
		}
		ints[i] = n
	}
	r := programs.ReplyOf(ints)
	if !r.Status.Valid() || r.Check(p) != nil {
		return programs.Reply{}, false
	}
	return r, true
}
