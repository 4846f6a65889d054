package programs

import (
	"context"
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// referenceInt is the programs' first int(): a type check, the length bound,
// the anchored pattern, then tonumber. The programs' current int() must accept
// exactly the same strings and return the same numbers.
const referenceInt = `local function refint(s)
  if type(s) ~= 'string' or #s > 16 then return nil end
  if s ~= '0' and not string.find(s, '^[1-9][0-9]*$') then return nil end
  local n = tonumber(s)
  if n == nil or n > M then return nil end
  return n
end
`

var (
	luaIntFunc  = regexp.MustCompile(`(?s)\nlocal function int\(s\)\n.*?\nend\n`)
	luaLocalDef = regexp.MustCompile(`(?m)^local (M|find) = .*$`)
)

// intScript returns a script that applies the program's own int() (taken
// from its source with the locals it uses) and referenceInt to every ARGV
// and returns, per argument, the two results, -1 standing for nil. With
// KEYS[1] = "absent" it applies both to nil and false instead.
func intScript(t testing.TB, src string) string {
	t.Helper()
	fn := luaIntFunc.FindString(src)
	require.NotEmpty(t, fn, "no int() in the program")
	var b strings.Builder
	for _, def := range luaLocalDef.FindAllString(src, -1) {
		b.WriteString(def + "\n")
	}
	b.WriteString(fn)
	b.WriteString(referenceInt)
	b.WriteString(`local out = {}
local function put(x) if x == nil then out[#out + 1] = -1 else out[#out + 1] = x end end
if KEYS[1] == 'absent' then
  put(int(false)); put(refint(false))
  put(int(nil)); put(refint(nil))
  return out
end
for i = 1, #ARGV do put(int(ARGV[i])); put(refint(ARGV[i])) end
return out
`)
	return b.String()
}

// trickyInts is the corpus: hand-picked edge cases, every string of up to
// three characters over an alphabet of digits, signs, separators, exponent,
// hex and NaN/Inf letters, whitespace and NUL, and random mutations of
// numbers near the bounds.
func trickyInts() []string {
	m := strconv.FormatInt(ratelimit.MaxExactInt, 10)
	out := []string{
		"", "0", "00", "01", "-0", "+0", "-1", "+1", " 1", "1 ", "\t1", "1\n", "1\x00", "\x00", "1\x002", "0\x00",
		"0x10", "0X10", "0x", "0x0", "1x", "1e3", "1E3", "1e+3", "1e-3", "10e2", "1e2", "12e2", "1.", ".1", "1.0", "0.0", "1.5",
		"inf", "-inf", "+inf", "INF", "Inf", "infinity", "nan", "NaN", "-nan", "0b1", "1_000", "１", "٣",
		m, "9007199254740992", "9007199254740993", "9999999999999999", "10000000000000000", "99999999999999999",
		"0000000000000001", "4503599627370495", "4503599627370496", "35184372088832", "9223372036854", "1e15",
		strings.Repeat("9", 17), strings.Repeat("1", 100), strings.Repeat("9", 400), "1" + strings.Repeat("0", 308),
		"1" + strings.Repeat("0", 309), "0" + m, m + "0", m + " ", " " + m, "1796289289686", "999999", "1000000",
	}
	alphabet := []string{"0", "1", "5", "9", " ", "\t", "\n", "\v", "\f", "\r", "+", "-", ".", "e", "E", "x", "X", "\x00", "a", "f", "i", "n", "p"}
	var gen func(prefix string, n int)
	gen = func(prefix string, n int) {
		if n == 0 {
			return
		}
		for _, c := range alphabet {
			out = append(out, prefix+c)
			gen(prefix+c, n-1)
		}
	}
	gen("", 3)
	rng := rand.New(rand.NewPCG(11, 23))
	bases := []int64{0, 1, 9, 10, 1000, 1_000_000, ratelimit.MaxServerMillis, ratelimit.MaxHorizonMillis, ratelimit.MaxExactInt / 2, ratelimit.MaxExactInt - 1, ratelimit.MaxExactInt}
	for i := 0; i < 20000; i++ {
		var s string
		if i%2 == 0 {
			s = strconv.FormatInt(bases[rng.IntN(len(bases))]+rng.Int64N(3)-1, 10)
		} else {
			s = strconv.FormatUint(rng.Uint64()>>rng.IntN(64), 10)
		}
		if s == "-1" {
			s = "1"
		}
		switch rng.IntN(4) {
		case 0: // insert a character
			p := rng.IntN(len(s) + 1)
			s = s[:p] + alphabet[rng.IntN(len(alphabet))] + s[p:]
		case 1: // replace a character
			p := rng.IntN(len(s))
			s = s[:p] + alphabet[rng.IntN(len(alphabet))] + s[p+1:]
		case 2: // leading zeros or an exponent
			if rng.IntN(2) == 0 {
				s = strings.Repeat("0", 1+rng.IntN(3)) + s
			} else {
				s += "e" + strconv.Itoa(rng.IntN(4))
			}
		}
		out = append(out, s)
	}
	return out
}

// checkInts runs intScript on c over the corpus: the program's int() and the
// reference agree on every string and on nil and false, and both agree with
// the model's parseInt.
func checkInts(t *testing.T, c redis.Cmdable, src string) {
	t.Helper()
	ctx := context.Background()
	script := intScript(t, src)
	corpus := trickyInts()
	const batch = 1000
	for start := 0; start < len(corpus); start += batch {
		part := corpus[start:min(start+batch, len(corpus))]
		args := make([]any, len(part))
		for i, s := range part {
			args[i] = s
		}
		got, err := evalInts(ctx, c, script, []string{"k"}, args...)
		require.NoError(t, err)
		require.Len(t, got, 2*len(part))
		for i, s := range part {
			want := int64(-1)
			if n, ok := parseInt(s); ok {
				want = n
			}
			require.Equal(t, got[2*i+1], got[2*i], "int(%q) = %d, the reference gives %d", s, got[2*i], got[2*i+1])
			require.Equal(t, want, got[2*i], "int(%q) = %d, parseInt gives %d", s, got[2*i], want)
		}
	}
	got, err := evalInts(ctx, c, script, []string{"absent"})
	require.NoError(t, err)
	require.Equal(t, []int64{-1, -1, -1, -1}, got, "false and nil are not integers")
	t.Logf("%d strings", len(corpus))
}

// TestIntMatchesReference: the int() of every program, on miniredis's Lua.
func TestIntMatchesReference(t *testing.T) {
	m := newMini(t)
	require.Len(t, All(), len(algorithms), "manifest: %v", Verify())
	for _, p := range All() {
		t.Run(p.Name, func(t *testing.T) { checkInts(t, m.c, p.Source) })
	}
}

// TestRedisIntMatchesReference: the int() of every program, on the real
// server's Lua 5.1 (strtod, and Redis's own string library).
func TestRedisIntMatchesReference(t *testing.T) {
	srv := redistest.Start(t)
	require.Len(t, All(), len(algorithms), "manifest: %v", Verify())
	for _, p := range All() {
		t.Run(p.Name, func(t *testing.T) { checkInts(t, srv.Client(), p.Source) })
	}
}
