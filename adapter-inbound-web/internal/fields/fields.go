// Package fields owns the rate-limit header fields the web adapter sends and
// their rounding rules, for the edge middleware and the local limiter alike:
//
//   - RateLimit: "<policy>";r=<remaining>;t=<seconds to reset> and
//     RateLimit-Policy: "<policy>";q=<quota>;w=<window seconds>, the pair of
//     draft-ietf-httpapi-ratelimit-headers-10 (Structured Field Lists of one
//     Item, a String with Integer parameters);
//   - RateLimit-Limit, RateLimit-Remaining and RateLimit-Reset, the three
//     bare Integer fields of the drafts up to -06, for older clients, unless
//     switched off;
//   - the whole-second roundings of Retry-After and of the reset.
//
// It imports only the standard library. It must never import another
// package of this module, shared-contract or anything outside the standard
// library.
package fields

import (
	"net/http"
	"strconv"
	"time"
)

// The field names in canonical form (header names are case-insensitive; Go
// writes them like this), so that setting them does not canonicalize per
// request.
const (
	RateLimit          = "Ratelimit"
	RateLimitPolicy    = "Ratelimit-Policy"
	LegacyLimit        = "Ratelimit-Limit"
	LegacyRemaining    = "Ratelimit-Remaining"
	LegacyReset        = "Ratelimit-Reset"
	RetryAfter         = "Retry-After"
	maxStructuredInt   = 999_999_999_999_999 // RFC 9651 sf-integer: at most 15 digits
	maxPolicyNameBytes = 64
)

// Bucket is what a limiter knows about the client's bucket under one policy.
type Bucket struct {
	// Policy names the policy (the String of both fields).
	Policy string
	// Quota is the limit or capacity: q= and RateLimit-Limit.
	Quota int64
	// Remaining is what is left after this request: r= and
	// RateLimit-Remaining, clamped to 0..Quota.
	Remaining int64
	// Reset is the time until the bucket is full again: t= and
	// RateLimit-Reset, as ResetSeconds.
	Reset time.Duration
	// Window is the policy window in whole seconds: w=; 0 omits it.
	Window int64
	// Concurrent marks a concurrency limit (ADR 0041): its quota counts
	// requests in flight, written as the draft's quota unit
	// qu="concurrent-requests", and it has no window.
	Concurrent bool
}

// Set writes RateLimit and RateLimit-Policy for b into h, and, when legacy
// is true, RateLimit-Limit, RateLimit-Remaining and RateLimit-Reset with the
// same numbers. Every value is a non-negative integer of at most 15 digits.
// The values share one string and the field slices one backing array (two
// allocations).
func Set(h http.Header, b Bucket, legacy bool) {
	quota := min(max(b.Quota, 0), maxStructuredInt)
	remaining := min(max(b.Remaining, 0), quota)
	reset := min(ResetSeconds(b.Reset), maxStructuredInt)
	window := b.Window

	var buf [256]byte
	var ends [5]int
	s := appendString(buf[:0], b.Policy)
	s = append(s, ";r="...)
	s = strconv.AppendInt(s, remaining, 10)
	s = append(s, ";t="...)
	s = strconv.AppendInt(s, reset, 10)
	ends[0] = len(s)
	s = appendPolicyItem(s, b.Policy, quota, window, b.Concurrent)
	ends[1] = len(s)
	n := 2
	if legacy {
		s = strconv.AppendInt(s, quota, 10)
		ends[2] = len(s)
		s = strconv.AppendInt(s, remaining, 10)
		ends[3] = len(s)
		s = strconv.AppendInt(s, reset, 10)
		ends[4] = len(s)
		n = 5
	}
	all := string(s)
	vals := make([]string, n)
	start := 0
	for i := range n {
		vals[i] = all[start:ends[i]]
		start = ends[i]
	}
	h[RateLimit] = vals[0:1:1]
	h[RateLimitPolicy] = vals[1:2:2]
	if legacy {
		h[LegacyLimit] = vals[2:3:3]
		h[LegacyRemaining] = vals[3:4:4]
		h[LegacyReset] = vals[4:5:5]
	}
}

// PolicyList renders the RateLimit-Policy value of a policy set (ADR
// 0027): one list member per bucket, in order, each its Policy with q= and,
// when positive, w=, as Set writes them for one bucket.
func PolicyList(buckets []Bucket) string {
	var s []byte
	for i, b := range buckets {
		if i > 0 {
			s = append(s, ", "...)
		}
		s = appendPolicyItem(s, b.Policy, min(max(b.Quota, 0), maxStructuredInt), b.Window, b.Concurrent)
	}
	return string(s)
}

// appendPolicyItem appends one RateLimit-Policy item: the policy name, q=
// quota (already clamped), qu="concurrent-requests" for a concurrency
// limit and, when the window is positive, w= (clamped).
func appendPolicyItem(s []byte, name string, quota, window int64, concurrent bool) []byte {
	s = appendString(s, name)
	s = append(s, ";q="...)
	s = strconv.AppendInt(s, quota, 10)
	if concurrent {
		s = append(s, `;qu="concurrent-requests"`...)
	}
	if w := min(max(window, 0), maxStructuredInt); w > 0 {
		s = append(s, ";w="...)
		s = strconv.AppendInt(s, w, 10)
	}
	return s
}

// SetRetryAfter writes Retry-After: RetryAfterSeconds(d).
func SetRetryAfter(h http.Header, d time.Duration) {
	h[RetryAfter] = []string{strconv.FormatInt(RetryAfterSeconds(d), 10)}
}

// appendString appends name as an RFC 9651 sf-string: quoted, with '\' and
// '"' escaped, bytes outside printable ASCII replaced by '?', at most
// maxPolicyNameBytes bytes of name. Policy IDs ([a-z0-9._-]) pass unchanged.
func appendString(b []byte, name string) []byte {
	b = append(b, '"')
	for i := 0; i < len(name) && i < maxPolicyNameBytes; i++ {
		c := name[i]
		switch {
		case c == '\\' || c == '"':
			b = append(b, '\\', c)
		case c < 0x20 || c > 0x7e:
			b = append(b, '?')
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}

// ceilSeconds is d in whole seconds rounded up; 0 for d <= 0.
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	s := int64(d / time.Second)
	if d%time.Second != 0 {
		s++
	}
	return s
}

// ResetSeconds is the reset in whole seconds, rounded up, never negative: a
// reset already passed is 0.
func ResetSeconds(d time.Duration) int64 { return ceilSeconds(d) }

// RetryAfterSeconds is Retry-After in whole seconds, rounded up, at least 1:
// a client told 0 would retry at once into the same answer.
func RetryAfterSeconds(d time.Duration) int64 { return max(ceilSeconds(d), 1) }
