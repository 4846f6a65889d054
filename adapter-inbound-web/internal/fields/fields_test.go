package fields

import (
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The grammar the fields must follow (RFC 9651 with the draft's
// parameters): a List of one Item, a String, then Integer parameters of at
// most 15 digits, no sign.
var (
	sfInt       = `(0|[1-9][0-9]{0,14})`
	sfString    = `"((?:[\x20\x21\x23-\x5b\x5d-\x7e]|\\[\\"])*)"`
	rateLimitRE = regexp.MustCompile(`^` + sfString + `;r=` + sfInt + `;t=` + sfInt + `$`)
	policyRE    = regexp.MustCompile(`^` + sfString + `;q=` + sfInt + `(?:;w=` + sfInt + `)?$`)
	legacyRE    = regexp.MustCompile(`^` + sfInt + `$`)
)

func atoi(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	require.NoError(t, err)
	return n
}

func TestSetFollowsTheBucket(t *testing.T) {
	tests := []struct {
		name                  string
		b                     Bucket
		r, t, q, w            int64 // w -1: absent
		rateLimit, policyText string
	}{
		{name: "plain", b: Bucket{Policy: "api", Quota: 10, Remaining: 3, Reset: 1001 * time.Millisecond, Window: 60},
			r: 3, t: 2, q: 10, w: 60, rateLimit: `"api";r=3;t=2`, policyText: `"api";q=10;w=60`},
		{name: "reset passed is 0, never negative", b: Bucket{Policy: "api", Quota: 10, Remaining: 10, Reset: -time.Hour, Window: 1},
			r: 10, t: 0, q: 10, w: 1, rateLimit: `"api";r=10;t=0`, policyText: `"api";q=10;w=1`},
		{name: "exact second", b: Bucket{Policy: "login.v2", Quota: 5, Remaining: 0, Reset: 60 * time.Second},
			r: 0, t: 60, q: 5, w: -1, rateLimit: `"login.v2";r=0;t=60`, policyText: `"login.v2";q=5`},
		{name: "remaining clamped to quota", b: Bucket{Policy: "a", Quota: 5, Remaining: 9, Reset: time.Millisecond},
			r: 5, t: 1, q: 5, w: -1, rateLimit: `"a";r=5;t=1`, policyText: `"a";q=5`},
		{name: "negatives clamped", b: Bucket{Policy: "a", Quota: -1, Remaining: -4, Window: -3},
			r: 0, t: 0, q: 0, w: -1, rateLimit: `"a";r=0;t=0`, policyText: `"a";q=0`},
		{name: "huge values fit sf-integer", b: Bucket{Policy: "a", Quota: 1 << 62, Remaining: 1 << 62, Reset: 1 << 62, Window: 1 << 62},
			r: maxStructuredInt, t: 4611686019, q: maxStructuredInt, w: maxStructuredInt},
		{name: "quote and backslash escaped", b: Bucket{Policy: `a"b\c` + "\x01", Quota: 1, Remaining: 1},
			r: 1, t: 0, q: 1, w: -1, rateLimit: `"a\"b\\c?";r=1;t=0`, policyText: `"a\"b\\c?";q=1`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, legacy := range []bool{true, false} {
				h := http.Header{}
				Set(h, tt.b, legacy)
				rl := h.Get("RateLimit")
				pol := h.Get("RateLimit-Policy")
				m := rateLimitRE.FindStringSubmatch(rl)
				require.NotNil(t, m, "RateLimit %q is not the draft's syntax", rl)
				p := policyRE.FindStringSubmatch(pol)
				require.NotNil(t, p, "RateLimit-Policy %q is not the draft's syntax", pol)
				assert.Equal(t, m[1], p[1], "both fields name the same policy")
				assert.Equal(t, tt.r, atoi(t, m[2]), "r")
				assert.Equal(t, tt.t, atoi(t, m[3]), "t")
				assert.Equal(t, tt.q, atoi(t, p[2]), "q")
				if tt.w < 0 {
					assert.Empty(t, p[3], "w absent")
				} else {
					assert.Equal(t, tt.w, atoi(t, p[3]), "w")
				}
				if tt.rateLimit != "" {
					assert.Equal(t, tt.rateLimit, rl)
					assert.Equal(t, tt.policyText, pol)
				}
				if !legacy {
					for _, f := range []string{"RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset"} {
						assert.Empty(t, h.Values(f), "legacy off: no %s", f)
					}
					continue
				}
				for f, want := range map[string]int64{"RateLimit-Limit": tt.q, "RateLimit-Remaining": tt.r, "RateLimit-Reset": tt.t} {
					require.Len(t, h.Values(f), 1, f)
					require.Regexp(t, legacyRE, h.Get(f), f)
					assert.Equal(t, want, atoi(t, h.Get(f)), "%s carries the same number as the structured field", f)
				}
			}
		})
	}
}

func TestSetAllocations(t *testing.T) {
	h := http.Header{}
	b := Bucket{Policy: "api", Quota: 100, Remaining: 42, Reset: 30 * time.Second, Window: 60}
	assert.LessOrEqual(t, testing.AllocsPerRun(100, func() { Set(h, b, true) }), 2.0)
}

func TestRoundings(t *testing.T) {
	for _, c := range []struct {
		d            time.Duration
		reset, retry int64
	}{
		{-time.Second, 0, 1}, {0, 0, 1}, {time.Nanosecond, 1, 1}, {time.Millisecond, 1, 1},
		{time.Second, 1, 1}, {time.Second + time.Millisecond, 2, 2}, {59500 * time.Millisecond, 60, 60},
	} {
		assert.Equal(t, c.reset, ResetSeconds(c.d), "ResetSeconds(%v)", c.d)
		assert.Equal(t, c.retry, RetryAfterSeconds(c.d), "RetryAfterSeconds(%v)", c.d)
	}
	h := http.Header{}
	SetRetryAfter(h, 1500*time.Millisecond)
	assert.Equal(t, "2", h.Get("Retry-After"))
}
