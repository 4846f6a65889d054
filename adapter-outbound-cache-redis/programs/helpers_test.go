package programs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/programs/luasrc"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// vectorFile is testdata/rate-vectors-v1.json (docs/contract.md section 5).
type vectorFile struct {
	Format string       `json:"format"`
	Note   string       `json:"note"`
	Cases  []vectorCase `json:"cases"`
}

type vectorCase struct {
	Name      string `json:"name"`
	Algorithm string `json:"algorithm"`
	Params    struct {
		Limit              int64 `json:"limit"`
		WindowMillis       int64 `json:"windowMillis"`
		Capacity           int64 `json:"capacity"`
		RefillTokens       int64 `json:"refillTokens"`
		RefillPeriodMillis int64 `json:"refillPeriodMillis"`
	} `json:"params"`
	MaxClockRegressionMillis int64        `json:"maxClockRegressionMillis"`
	Steps                    []vectorStep `json:"steps"`
}

type vectorStep struct {
	ServerNowMillis    int64  `json:"serverNowMillis"`
	Cost               int64  `json:"cost"`
	Status             int64  `json:"status"`
	EffectiveNowMillis *int64 `json:"effectiveNowMillis"`
	Limit              int64  `json:"limit"`
	Remaining          int64  `json:"remaining"`
	RetryAfterMillis   int64  `json:"retryAfterMillis"`
	ResetAtMillis      int64  `json:"resetAtMillis"`
}

func loadVectors(t testing.TB) vectorFile {
	t.Helper()
	raw, err := os.ReadFile("testdata/rate-vectors-v1.json")
	require.NoError(t, err)
	var vf vectorFile
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&vf))
	require.Equal(t, "rate-vectors/v1", vf.Format)
	require.Len(t, vf.Cases, 159)
	return vf
}

const vectorGrace = 5 * time.Second

// policy builds the case's Policy through NewPolicy (maxCost = limit).
func (vc vectorCase) policy(t testing.TB) ratelimit.Policy {
	t.Helper()
	alg, err := ratelimit.ParseAlgorithm(vc.Algorithm)
	require.NoError(t, err)
	ms := func(n int64) time.Duration { return time.Duration(n) * time.Millisecond }
	var params ratelimit.Params
	limit := vc.Params.Limit
	switch alg {
	case ratelimit.AlgorithmFixedWindow:
		params = ratelimit.FixedWindow{Limit: vc.Params.Limit, Window: ms(vc.Params.WindowMillis)}
	case ratelimit.AlgorithmSlidingWindowCounter:
		params = ratelimit.SlidingWindowCounter{Limit: vc.Params.Limit, Window: ms(vc.Params.WindowMillis)}
	case ratelimit.AlgorithmTokenBucket:
		params = ratelimit.TokenBucket{Capacity: vc.Params.Capacity, RefillTokens: vc.Params.RefillTokens, RefillPeriod: ms(vc.Params.RefillPeriodMillis)}
		limit = vc.Params.Capacity
	}
	return mustPolicy(t, alg, params, limit, vectorGrace, ms(vc.MaxClockRegressionMillis))
}

func mustPolicy(t testing.TB, alg ratelimit.Algorithm, params ratelimit.Params, maxCost int64, grace, regression time.Duration) ratelimit.Policy {
	t.Helper()
	p, err := ratelimit.NewPolicy(ratelimit.PolicySpec{
		ID:                 "programs-test",
		Revision:           7,
		Algorithm:          alg,
		Params:             params,
		MaxCost:            maxCost,
		CleanupGrace:       grace,
		MaxClockRegression: regression,
		FailurePolicy:      ratelimit.FailClosed,
	})
	require.NoError(t, err)
	return p
}

// checkStep compares a reply with a vector step: every field for ALLOWED and
// DENIED, the status for CLOCK_UNSAFE (the vectors leave the rest open).
func checkStep(t testing.TB, where string, st vectorStep, got Reply) {
	t.Helper()
	require.Equal(t, Status(st.Status), got.Status, "%s: status (reply %+v)", where, got)
	if st.EffectiveNowMillis == nil {
		require.Equal(t, StatusClockUnsafe, got.Status, "%s: a row without effectiveNowMillis is CLOCK_UNSAFE", where)
		return
	}
	want := Reply{
		Status:             Status(st.Status),
		ServerNowMillis:    st.ServerNowMillis,
		EffectiveNowMillis: *st.EffectiveNowMillis,
		Limit:              st.Limit,
		Remaining:          st.Remaining,
		RetryAfterMillis:   st.RetryAfterMillis,
		ResetAtMillis:      st.ResetAtMillis,
	}
	require.Equal(t, want, got, where)
}

// luaBody is the program text as Redis runs it: the `#!lua` line is consumed
// by Redis, so it is blanked (keeping line numbers) for miniredis, which does
// not accept it.
func luaBody(t testing.TB, src string) string {
	t.Helper()
	require.True(t, strings.HasPrefix(src, "#!lua\n"), "program must start with the #!lua line")
	return src[len("#!lua"):]
}

// miniTTLCap is the longest TTL, in ms, handed on to miniredis, which keeps
// TTLs as a time.Duration and drops a key whose TTL overflows it (2^63 ns is
// about 9.2e12 ms, and the edge policies reach 2*MaxHorizonMillis). Longer
// TTLs are checked on the real server (redis_test.go).
const miniTTLCap = 1 << 40

// harness wraps redis.call for miniredis runs: a TIME test double for
// instants SetTime cannot represent (UnixNano ends in 2262), and the
// miniTTLCap clamp on SET ... PX. It also defines (luasrc.StructShim) a
// test-only pure-Lua struct.pack/struct.unpack for the big-endian unsigned formats the programs
// use ('>B', '>I5'..'>I7'): miniredis's Lua preloads no struct library (ADR
// 0010). The program text itself is unchanged; the real-server tests run it
// with Redis's own struct library.
func harness(timeDouble bool, sec, usec int64) string {
	tm := "nil"
	if timeDouble {
		tm = fmt.Sprintf("{%q, %q}", fmt.Sprint(sec), fmt.Sprint(usec))
	}
	return fmt.Sprintf(`local __call, __time = redis.call, %s
redis.call = function(c, ...)
  if c == 'TIME' and __time then return __time end
  if c == 'SET' and select('#', ...) == 4 then
    local k, v, px, ms = ...
    if ms > %d then ms = %d end
    return __call(c, k, v, px, ms)
  end
  return __call(c, ...)
end
`, tm, miniTTLCap, miniTTLCap) + luasrc.StructShim
}

// mini is a miniredis server with a client, driving programs under a
// controlled clock.
type mini struct {
	t   testing.TB
	srv *miniredis.Miniredis
	c   *redis.Client
}

func newMini(t testing.TB) *mini {
	t.Helper()
	srv := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1, Protocol: 2})
	t.Cleanup(func() { _ = c.Close() })
	return &mini{t: t, srv: srv, c: c}
}

// run evaluates prog at serverNowMillis with raw ARGV and returns the reply
// integers, or the error Redis answered.
func (m *mini) run(prog Program, nowMillis int64, key string, args ...any) ([]int64, error) {
	m.t.Helper()
	double := nowMillis < 0 || nowMillis > math.MaxInt64/1_000_000
	if !double {
		m.srv.SetTime(time.UnixMilli(nowMillis))
	}
	body := harness(double, nowMillis/1000, nowMillis%1000*1000) + luaBody(m.t, prog.Source)
	return evalInts(context.Background(), m.c, body, []string{key}, args...)
}

// eval evaluates prog with a Policy-built ARGV and parses the reply.
func (m *mini) eval(prog Program, p ratelimit.Policy, nowMillis int64, key string, cost int64) Reply {
	m.t.Helper()
	v, err := m.run(prog, nowMillis, key, Args(p, cost)...)
	require.NoError(m.t, err)
	return toReply(m.t, v)
}

// evalInts runs a script and requires a flat array of integers.
func evalInts(ctx context.Context, c redis.Cmdable, src string, keys []string, args ...any) ([]int64, error) {
	res, err := c.Eval(ctx, src, keys, args...).Result()
	if err != nil {
		return nil, err
	}
	arr, ok := res.([]any)
	if !ok {
		return nil, fmt.Errorf("reply %#v is not an array", res)
	}
	out := make([]int64, len(arr))
	for i, x := range arr {
		n, ok := x.(int64)
		if !ok {
			return nil, fmt.Errorf("reply element %d %#v is not an integer", i, x)
		}
		out[i] = n
	}
	return out, nil
}

func toReply(t testing.TB, v []int64) Reply {
	t.Helper()
	require.Len(t, v, ReplyLen)
	var a [ReplyLen]int64
	copy(a[:], v)
	return ReplyOf(a)
}

func mustProgram(t testing.TB, a ratelimit.Algorithm) Program {
	t.Helper()
	p, ok := ForAlgorithm(a)
	require.True(t, ok, "program for %v (manifest: %v)", a, Verify())
	return p
}

// getState returns the key's state value (nil if absent).
func getState(t testing.TB, c redis.Cmdable, key string) State {
	t.Helper()
	s, err := c.Get(context.Background(), key).Result()
	if errors.Is(err, redis.Nil) {
		return nil
	}
	require.NoError(t, err)
	return State(s)
}

var algorithms = []ratelimit.Algorithm{
	ratelimit.AlgorithmFixedWindow,
	ratelimit.AlgorithmSlidingWindowCounter,
	ratelimit.AlgorithmTokenBucket,
	ratelimit.AlgorithmGCRA,
	ratelimit.AlgorithmSlidingLog,
	ratelimit.AlgorithmLeakyBucket,
	ratelimit.AlgorithmConcurrency,
}

// smallPolicy is a simple valid policy for algorithm a.
func smallPolicy(t testing.TB, a ratelimit.Algorithm, regression time.Duration) ratelimit.Policy {
	t.Helper()
	switch a {
	case ratelimit.AlgorithmFixedWindow:
		return mustPolicy(t, a, ratelimit.FixedWindow{Limit: 5, Window: time.Second}, 5, time.Second, regression)
	case ratelimit.AlgorithmSlidingWindowCounter:
		return mustPolicy(t, a, ratelimit.SlidingWindowCounter{Limit: 5, Window: time.Second}, 5, time.Second, regression)
	case ratelimit.AlgorithmGCRA:
		return mustPolicy(t, a, ratelimit.GCRA{Rate: 3, Period: time.Second, Burst: 5}, 5, time.Second, regression)
	case ratelimit.AlgorithmSlidingLog:
		return mustPolicy(t, a, ratelimit.SlidingLog{Limit: 5, Window: time.Second}, 5, time.Second, regression)
	case ratelimit.AlgorithmLeakyBucket:
		return mustPolicy(t, a, ratelimit.LeakyBucket{Rate: 3, Period: time.Second, QueueSize: 4, DelayAfter: 1, MaxDelay: time.Second}, 5, time.Second, regression)
	case ratelimit.AlgorithmConcurrency:
		return mustPolicy(t, a, ratelimit.Concurrency{Limit: 5, MaxHold: time.Second}, 5, time.Second, regression)
	default:
		return mustPolicy(t, a, ratelimit.TokenBucket{Capacity: 5, RefillTokens: 3, RefillPeriod: time.Second}, 5, time.Second, regression)
	}
}

func ceilDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 {
		q++
	}
	return q
}

// golden compares v, as indented JSON with a final newline, with the file
// at path, after rewriting the file first when update is set; regen is the
// command that rewrites it, named in the failure.
func golden(t *testing.T, path string, v any, update bool, regen string) {
	t.Helper()
	raw, err := json.MarshalIndent(v, "", " ")
	require.NoError(t, err)
	raw = append(raw, '\n')
	if update {
		require.NoError(t, os.WriteFile(path, raw, 0o644))
	}
	onDisk, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, string(raw), string(onDisk), "%s is stale: run %s", path, regen)
}
