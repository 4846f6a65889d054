package programs

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// malformedStates derives, from a valid state of p, every kind of hash the
// programs must refuse: a missing or extra field, a non-canonical or
// non-integer value, the wrong schema, algorithm or revision, and values out
// of range or inconsistent with each other.
func malformedStates(p ratelimit.Policy, valid State) map[string]State {
	n := numbersOf(p)
	with := func(field, value string) State {
		st := cloneState(valid)
		st[field] = value
		return st
	}
	out := map[string]State{
		"extra field":       with("x", "1"),
		"schema 2":          with(FieldSchema, "2"),
		"schema 0":          with(FieldSchema, "0"),
		"revision other":    with(FieldRevision, strconv.FormatInt(p.Revision()+1, 10)),
		"lastObserved > S":  with(FieldLastObserved, strconv.FormatInt(ratelimit.MaxServerMillis+1, 10)),
		"value > 2^53-1":    with(FieldLastObserved, "9007199254740992"),
		"value of 17 chars": with(FieldLastObserved, "01796000000000000"),
	}
	for _, bad := range []string{"", "1.5", "-1", "+1", "01", "1e3", " 1", "1 ", "0x10", "abc", "1796000000000.0"} {
		out["lastObserved "+strconv.Quote(bad)] = with(FieldLastObserved, bad)
	}
	for _, f := range stateFields(n.alg) {
		st := cloneState(valid)
		delete(st, f)
		out["missing "+f] = st
		out["non-integer "+f] = with(f, "x")
	}
	for _, a := range algorithms {
		if a != n.alg {
			out["algorithm "+a.String()] = with(FieldAlgorithm, strconv.Itoa(int(a)))
		}
	}
	out["algorithm 0"] = with(FieldAlgorithm, "0")
	lim := strconv.FormatInt(n.limit, 10)
	over := strconv.FormatInt(n.limit+1, 10)
	switch n.alg {
	case ratelimit.AlgorithmFixedWindow, ratelimit.AlgorithmSlidingWindowCounter:
		w, _ := strconv.ParseInt(valid[FieldWindow], 10, 64)
		out["window id not floor(l/window)"] = with(FieldWindow, strconv.FormatInt(w+1, 10))
		out["window id behind"] = with(FieldWindow, strconv.FormatInt(w-1, 10))
		out["count 0"] = with(FieldCount, "0")
		out["count > limit"] = with(FieldCount, over)
		if n.alg == ratelimit.AlgorithmSlidingWindowCounter {
			out["previous > limit"] = with(FieldPrevious, over)
		}
	case ratelimit.AlgorithmTokenBucket:
		out["tokens = capacity"] = with(FieldTokens, lim)
		out["remainder = period"] = with(FieldRemainder, strconv.FormatInt(n.per, 10))
	}
	return out
}

// TestMalformedStateIsIncompatible: every malformed hash is answered
// STATE_INCOMPATIBLE (serverNow set, the rest 0) and left exactly as it was,
// by the model and by the program.
func TestMalformedStateIsIncompatible(t *testing.T) {
	for _, a := range algorithms {
		t.Run(a.String(), func(t *testing.T) {
			p := smallPolicy(t, a, time.Second)
			_, valid := Evaluate(p, nil, t0, 2)
			require.NotEmpty(t, valid)
			cases := malformedStates(p, valid)
			require.Greater(t, len(cases), 20)
			onEngines(t, func(t *testing.T, e engine) {
				for name, st := range cases {
					e.seed(t, st)
					r := e.eval(t, p, t0+5, 1)
					require.Equal(t, Reply{Status: StatusStateIncompatible, ServerNowMillis: t0 + 5}, r, name)
					require.Equal(t, st, e.state(t), "%s: nothing written", name)
				}
				e.seed(t, valid)
				require.Equal(t, StatusAllowed, e.eval(t, p, t0+5, 1).Status, "the valid state itself is accepted")
			})
		})
	}
}

// TestWrongTypeIsIncompatible: a string, list, set, zset or stream at the
// key is STATE_INCOMPATIBLE and stays exactly as it was (miniredis; the real
// server in TestRedisTypeNormalization).
func TestWrongTypeIsIncompatible(t *testing.T) {
	m := newMini(t)
	for _, a := range algorithms {
		p := smallPolicy(t, a, time.Second)
		for kind, put := range wrongTypes() {
			key := a.String() + ":" + kind
			require.NoError(t, put(m.c, key))
			before := m.srv.Dump() // the whole database, as text
			r := m.eval(mustProgram(t, a), p, t0, key, 1)
			require.Equal(t, Reply{Status: StatusStateIncompatible, ServerNowMillis: t0}, r, key)
			require.Equal(t, before, m.srv.Dump(), key)
			require.Equal(t, time.Duration(0), m.srv.TTL(key), "no TTL was set")
		}
	}
}

func wrongTypes() map[string]func(redis.Cmdable, string) error {
	ctx := context.Background()
	return map[string]func(redis.Cmdable, string) error{
		"string": func(c redis.Cmdable, k string) error { return c.Set(ctx, k, "v", 0).Err() },
		"list":   func(c redis.Cmdable, k string) error { return c.RPush(ctx, k, "a", "b").Err() },
		"set":    func(c redis.Cmdable, k string) error { return c.SAdd(ctx, k, "a").Err() },
		"zset":   func(c redis.Cmdable, k string) error { return c.ZAdd(ctx, k, redis.Z{Score: 1, Member: "a"}).Err() },
		"stream": func(c redis.Cmdable, k string) error {
			return c.XAdd(ctx, &redis.XAddArgs{Stream: k, Values: []any{"f", "v"}}).Err()
		},
	}
}

// invalidArgs are ARGV lists every program must answer INVALID: wrong
// count, non-canonical integers, and values outside the ranges NewPolicy
// enforces. valid is a correct ARGV for the program.
func invalidArgs(valid []any) map[string][]any {
	with := func(i int, v any) []any {
		a := append([]any(nil), valid...)
		a[i] = v
		return a
	}
	out := map[string][]any{
		"no args":       {},
		"one too few":   valid[:len(valid)-1],
		"one too many":  append(append([]any(nil), valid...), 1),
		"revision 0":    with(ArgRevision, 0),
		"cost 0":        with(ArgCost, 0),
		"cost > limit":  with(ArgCost, 1_000_000),
		"grace 0":       with(ArgCleanupGrace, 0),
		"regression >H": with(ArgMaxClockRegression, ratelimit.MaxHorizonMillis+1),
		"limit 0":       with(ArgLimit, 0),
		"limit > M":     with(ArgLimit, "9007199254740992"),
	}
	for _, bad := range []string{"", "-1", "+1", "01", "1.0", "1e3", " 1", "1 ", "0x10", "abc", "12345678901234567", "inf", "nan"} {
		for i := range valid {
			out["arg "+strconv.Itoa(i)+" "+strconv.Quote(bad)] = with(i, bad)
		}
	}
	if len(valid) == ArgCountWindow {
		out["window 0"] = with(ArgWindow, 0)
	} else {
		out["refill tokens 0"] = with(ArgRefillTokens, 0)
		out["refill period 0"] = with(ArgRefillPeriod, 0)
		out["refill period > H"] = with(ArgRefillPeriod, ratelimit.MaxHorizonMillis+1)
	}
	return out
}

// TestInvalidArgsAreRefused: every malformed ARGV (and a KEYS count other
// than 1) is answered INVALID (serverNow set, the rest 0), creates no key and
// leaves existing state untouched.
func TestInvalidArgsAreRefused(t *testing.T) {
	m := newMini(t)
	ctx := context.Background()
	for _, a := range algorithms {
		t.Run(a.String(), func(t *testing.T) {
			p := smallPolicy(t, a, time.Second)
			prog := mustProgram(t, a)
			valid := Args(p, 1)
			require.Len(t, valid, prog.ArgCount)
			cases := invalidArgs(valid)
			for name, args := range cases {
				for _, existing := range []bool{false, true} {
					key := "inv:" + a.String()
					require.NoError(t, m.c.Del(ctx, key).Err())
					var st State
					if existing {
						_, st = Evaluate(p, nil, t0-10, 1)
						seedMini(t, m, key, st)
					}
					v, err := m.run(prog, t0, key, args...)
					require.NoError(t, err, name)
					require.Equal(t, Reply{Status: StatusInvalid, ServerNowMillis: t0}, toReply(t, v), name)
					require.Equal(t, st, hgetall(t, m.c, key), "%s: nothing written", name)
				}
			}
			body := luaBody(t, prog.Source)
			for _, keys := range [][]string{{}, {"a", "b"}} {
				v, err := evalInts(ctx, m.c, body, keys, valid...)
				require.NoError(t, err)
				require.Equal(t, int64(StatusInvalid), v[0], "%d keys", len(keys))
			}
		})
	}
}
