package programs

import (
	"context"
	"encoding/hex"
	"maps"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// malformedStates derives, from a valid state of p, every kind of value the
// programs must refuse: empty, too short or too long, another schema or
// algorithm in the header, another revision (same or other length, or not
// canonical), and field values out of range or inconsistent with each
// other.
func malformedStates(p ratelimit.Policy, valid State) map[string]State {
	n := numbersOf(p)
	f, err := valid.Decode()
	if err != nil {
		panic(err)
	}
	with := func(name string, v int64) State {
		g := maps.Clone(f)
		g[name] = v
		return reencode(valid, g)
	}
	header := func(b byte) State {
		st := cloneState(valid)
		st[0] = b
		return st
	}
	fixed := valid.packedLen()
	rev := strconv.FormatInt(p.Revision(), 10)
	withRev := func(r string) State { return append(cloneState(valid[:fixed]), r...) }
	out := map[string]State{
		"empty":                State{},
		"header only":          cloneState(valid[:1]),
		"no revision":          cloneState(valid[:fixed]),
		"one byte short":       cloneState(valid[:len(valid)-1]),
		"one byte extra":       append(cloneState(valid), '0'),
		"extra byte in fields": append(append(cloneState(valid[:fixed]), 0), rev...),
		"schema 1":             header(byte(1<<4 | int(n.alg))),
		"schema 3":             header(byte(3<<4 | int(n.alg))),
		"schema 0":             header(byte(int(n.alg))),
		"algorithm 0":          header(byte(SchemaVersion << 4)),
		"algorithm 15":         header(byte(SchemaVersion<<4 | 15)),
		"revision other":       withRev(strconv.FormatInt(p.Revision()+1, 10)),
		"revision longer":      withRev(strconv.FormatInt(p.Revision()+100, 10)),
		"revision leading 0":   withRev("0" + rev),
		"revision sign":        withRev("+" + rev),
		"revision space":       withRev(" " + rev),
		"lastObserved > S":     with(FieldLastObserved, ratelimit.MaxServerMillis+1),
		"lastObserved 2^48-1":  with(FieldLastObserved, 1<<48-1),
	}
	for _, a := range algorithms {
		if a != n.alg {
			out["algorithm "+a.String()] = header(byte(SchemaVersion<<4 | int(a)))
		}
	}
	switch n.alg {
	case ratelimit.AlgorithmFixedWindow, ratelimit.AlgorithmSlidingWindowCounter:
		w := f[FieldWindow]
		out["window id not floor(l/window)"] = with(FieldWindow, w+1)
		out["window id behind"] = with(FieldWindow, w-1)
		out["count 0"] = with(FieldCount, 0)
		out["count > limit"] = with(FieldCount, n.limit+1)
		if n.alg == ratelimit.AlgorithmSlidingWindowCounter {
			out["count 2^40-1"] = with(FieldCount, 1<<40-1)
			out["previous > limit"] = with(FieldPrevious, n.limit+1)
			out["previous 2^40-1"] = with(FieldPrevious, 1<<40-1)
		} else {
			out["count 2^56-1"] = with(FieldCount, 1<<56-1)
			out["count 2^53+1"] = with(FieldCount, 1<<53+1)
		}
	case ratelimit.AlgorithmTokenBucket:
		out["tokens = capacity"] = with(FieldTokens, n.limit)
		out["tokens 2^56-1"] = with(FieldTokens, 1<<56-1)
		out["remainder = period"] = with(FieldRemainder, n.per)
		out["remainder 2^48-1"] = with(FieldRemainder, 1<<48-1)
	case ratelimit.AlgorithmGCRA:
		out["arrival = B*P + 999*R + 1"] = with(FieldArrival, n.fullScaled+999*n.rate+1)
		out["arrival 2^53+1"] = with(FieldArrival, 1<<53+1)
		out["arrival 2^56-1"] = with(FieldArrival, 1<<56-1)
	case ratelimit.AlgorithmSlidingLog:
		entries, err := valid.LogEntries()
		if err != nil {
			panic(err)
		}
		l, r := f[FieldLastObserved], f[FieldRevision]
		out["sum 0"] = with(FieldSum, 0)
		out["sum > limit"] = with(FieldSum, n.limit+1)
		out["sum 2^16-1"] = with(FieldSum, 1<<16-1)
		out["entries 0"] = with(FieldEntries, 0)
		out["entries one more"] = with(FieldEntries, f[FieldEntries]+1)
		out["entries one fewer"] = with(FieldEntries, f[FieldEntries]-1)
		out["entries > sum"] = encodeLogRaw(r, l, 1, 2, []LogEntry{{l, 1}, {l, 1}})
		// A lease's entry is at its end, up to a window after l (ADR 0042).
		out["newest entry a window after l"] = encodeLogRaw(r, l, f[FieldSum], f[FieldEntries], append(entries[:len(entries)-1:len(entries)-1], LogEntry{l + n.win + 1, entries[len(entries)-1].Cost}))
		out["entries without a header"] = append(cloneState(valid[:1]), valid[fixed:]...)
	}
	return out
}

// reencode packs decoded fields f back into a value; a sliding log keeps
// orig's entries (and f's header, even where it contradicts them).
func reencode(orig State, f map[string]int64) State {
	a := ratelimit.Algorithm(f[FieldAlgorithm])
	if m := modelOf(a); m == nil || !m.logEntries {
		return encodeFields(f)
	}
	entries, err := orig.LogEntries()
	if err != nil {
		panic(err)
	}
	return encodeLogOf(a, f[FieldRevision], f[FieldLastObserved], f[FieldSum], f[FieldEntries], entries)
}

// encodeFields packs decoded fields (Decode's map) back into a value.
func encodeFields(f map[string]int64) State {
	a := ratelimit.Algorithm(f[FieldAlgorithm])
	names := stateFields(a)
	vals := make([]int64, len(names))
	for i, name := range names {
		vals[i] = f[name]
	}
	return encodeState(a, vals...)
}

// stateField is one field of a well-formed state value.
func stateField(t testing.TB, st State, name string) int64 {
	t.Helper()
	f, err := st.Decode()
	require.NoError(t, err)
	v, ok := f[name]
	require.True(t, ok, "field %q in %v", name, f)
	return v
}

// TestStateGolden pins the encoding (ADR 0010) with golden values, and
// Decode inverts it.
func TestStateGolden(t *testing.T) {
	cases := []struct {
		a    ratelimit.Algorithm
		vals []int64
		hex  string
	}{
		{ratelimit.AlgorithmFixedWindow, []int64{2, 1, 7, 1796000000123, 1796000000, 5},
			"21" + "01a229f1287b" + "00006b0cc900" + "00000000000005" + "37"},
		{ratelimit.AlgorithmSlidingWindowCounter, []int64{2, 2, 12345, 35184372088832, 1, 1<<40 - 1, 0},
			"22" + "200000000000" + "000000000001" + "ffffffffff" + "0000000000" + "3132333435"},
		{ratelimit.AlgorithmTokenBucket, []int64{2, 3, 1, 0, 1<<53 - 1, 9223372036854},
			"23" + "000000000000" + "1fffffffffffff" + "08637bd05af6" + "31"},
		// GCRA (ADR 0021, ADR 0029): d in the fewest of 4..7 bytes, l's
		// field carrying 2^46*(7-w).
		{ratelimit.AlgorithmGCRA, []int64{2, 4, 1, 1796000000123, 3_600_000_999},
			"24" + "c1a229f1287b" + "d693a7e7" + "31"},
		{ratelimit.AlgorithmGCRA, []int64{2, 4, 42, 35184372088832, 1 << 32},
			"24" + "a00000000000" + "0100000000" + "3432"},
		{ratelimit.AlgorithmGCRA, []int64{2, 4, 7, 0, 1<<48 - 1},
			"24" + "400000000000" + "ffffffffffff" + "37"},
		{ratelimit.AlgorithmGCRA, []int64{2, 4, 7, 1796000000123, 1<<53 - 1},
			"24" + "01a229f1287b" + "1fffffffffffff" + "37"},
		// A queue: GCRA's layout under header 0x26 (ADR 0028).
		{ratelimit.AlgorithmLeakyBucket, []int64{2, 6, 9, 1796000000123, 2_100_000},
			"26" + "c1a229f1287b" + "00200b20" + "39"},
	}
	for _, tc := range cases {
		st := encodeState(tc.a, tc.vals...)
		require.Equal(t, tc.hex, hex.EncodeToString(st), tc.a.String())
		require.Len(t, st, st.packedLen()+len(strconv.FormatInt(tc.vals[2], 10)))
		require.LessOrEqual(t, st.packedLen(), FixedStateBytes(tc.a))
		f, err := st.Decode()
		require.NoError(t, err)
		for i, name := range stateFields(tc.a) {
			require.Equal(t, tc.vals[i], f[name], "%v %s", tc.a, name)
		}
	}
	// Before ADR 0029 GCRA and the queue wrote d in 7 bytes; such a value
	// (code 0 in l's field) still reads the same.
	for _, old := range []struct {
		hex  string
		l, d int64
	}{
		{"24" + "01a229f1287b" + "00000000200b20" + "39", 1796000000123, 2_100_000},
		{"26" + "01a229f1287b" + "00000000200b20" + "39", 1796000000123, 2_100_000},
	} {
		raw, err := hex.DecodeString(old.hex)
		require.NoError(t, err)
		f, err := State(raw).Decode()
		require.NoError(t, err, old.hex)
		require.Equal(t, old.l, f[FieldLastObserved], old.hex)
		require.Equal(t, old.d, f[FieldArrival], old.hex)
		require.Equal(t, int64(9), f[FieldRevision], old.hex)
	}
	for _, bad := range []string{"", "21", "12" + "00", "20" + "00", "2f00", "21" + strings.Repeat("00", 19), "21" + strings.Repeat("00", 19) + "3031",
		// GCRA: l's field says d has 4 bytes, the value holds none.
		"24" + "c1a229f1287b" + "31", "24" + "c1a229"} {
		raw, err := hex.DecodeString(bad)
		require.NoError(t, err)
		_, err = State(raw).Decode()
		require.Error(t, err, bad)
	}
}

// TestMalformedStateIsIncompatible: every malformed value is answered
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

// TestWrongTypeIsIncompatible: a hash (the schema 1 state), list, set, zset or stream at the
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
		"hash": func(c redis.Cmdable, k string) error {
			return c.HSet(ctx, k, "v", "1", "a", "1", "r", "7", "l", "0", "w", "0", "c", "1").Err()
		},
		"list": func(c redis.Cmdable, k string) error { return c.RPush(ctx, k, "a", "b").Err() },
		"set":  func(c redis.Cmdable, k string) error { return c.SAdd(ctx, k, "a").Err() },
		"zset": func(c redis.Cmdable, k string) error { return c.ZAdd(ctx, k, redis.Z{Score: 1, Member: "a"}).Err() },
		"stream": func(c redis.Cmdable, k string) error {
			return c.XAdd(ctx, &redis.XAddArgs{Stream: k, Values: []any{"f", "v"}}).Err()
		},
	}
}

// withArg is valid with argument i replaced by v (valid is not modified).
func withArg(valid []any, i int, v any) []any {
	a := append([]any(nil), valid...)
	a[i] = v
	return a
}

// malformedArgs are the ARGV lists any program with the valid ARGV must
// answer INVALID whatever its ranges: the wrong count, and every
// position holding a string that is not a canonical integer in 0..M.
func malformedArgs(valid []any) map[string][]any {
	out := map[string][]any{
		"no args":      {},
		"one too few":  valid[:len(valid)-1],
		"one too many": append(append([]any(nil), valid...), 1),
	}
	for _, bad := range []string{"", "-1", "+1", "01", "1.0", "1e3", " 1", "1 ", "0x10", "abc", "12345678901234567", "inf", "nan",
		"9007199254740992", "99999999999999999999", "1\x00", "\x001"} {
		for i := range valid {
			out["arg "+strconv.Itoa(i)+" "+strconv.Quote(bad)] = withArg(valid, i, bad)
		}
	}
	return out
}

// invalidArgs are ARGV lists every program must answer INVALID: wrong
// count, non-canonical integers, and values outside the ranges NewPolicy
// enforces. valid is a correct ARGV for the program.
func invalidArgs(a ratelimit.Algorithm, valid []any) map[string][]any {
	with := func(i int, v any) []any { return withArg(valid, i, v) }
	out := malformedArgs(valid)
	for name, args := range map[string][]any{
		"revision 0":    with(ArgRevision, 0),
		"cost 0":        with(ArgCost, 0),
		"cost > limit":  with(ArgCost, 1_000_000),
		"grace 0":       with(ArgCleanupGrace, 0),
		"regression >H": with(ArgMaxClockRegression, ratelimit.MaxHorizonMillis+1),
		"limit 0":       with(ArgLimit, 0),
		"limit > M":     with(ArgLimit, "9007199254740992"),
	} {
		out[name] = args
	}
	switch {
	case len(valid) == ArgCountWindow:
		out["window 0"] = with(ArgWindow, 0)
	case a == ratelimit.AlgorithmGCRA || a == ratelimit.AlgorithmLeakyBucket:
		burst := valid[ArgLimit].(int64)
		out["rate 0"] = with(ArgRate, 0)
		out["period 0"] = with(ArgPeriodMicros, 0)
		out["rate > M/999"] = with(ArgRate, ratelimit.MaxExactInt/999+1)
		// G1: B*P + 999*R one above M.
		out["burst offset > M"] = with(ArgPeriodMicros, (ratelimit.MaxExactInt-999*valid[ArgRate].(int64))/burst+1)
		// G2: the horizon ceil(ceil(B*P/R)/1000)+1 = 1e12+1 one above
		// H - grace, with rate 1, burst 1 and P = 1e15 µs (G1 holds).
		g2 := with(ArgCleanupGrace, ratelimit.MaxHorizonMillis-1_000_000_000_000)
		g2[ArgCost], g2[ArgLimit], g2[ArgRate], g2[ArgPeriodMicros] = int64(1), int64(1), int64(1), int64(1_000_000_000_000_000)
		if a == ratelimit.AlgorithmLeakyBucket {
			g2[ArgDelayAfter] = int64(0)
			// ADR 0028: delayAfter is at most queueSize = burst - 1.
			out["delayAfter = burst"] = with(ArgDelayAfter, burst)
			out["delayAfter > M"] = with(ArgDelayAfter, "9007199254740992")
		}
		out["horizon > H - grace"] = g2
	default:
		out["refill tokens 0"] = with(ArgRefillTokens, 0)
		out["refill tokens > M"] = with(ArgRefillTokens, "9007199254740992")
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
			cases := invalidArgs(a, valid)
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
					require.Equal(t, st, getState(t, m.c, key), "%s: nothing written", name)
				}
			}
			body := harness(false, 0, 0) + luaBody(t, prog.Source)
			for _, keys := range [][]string{{}, {"a", "b"}} {
				v, err := evalInts(ctx, m.c, body, keys, valid...)
				require.NoError(t, err)
				require.Equal(t, int64(StatusInvalid), v[0], "%d keys", len(keys))
			}
		})
	}
}
