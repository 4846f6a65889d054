package programs

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// Status is the first reply field: what the program did.
type Status int64

// The program statuses. Only StatusAllowed and StatusDenied carry a decision;
// no status other than StatusAllowed has written anything.
const (
	// StatusAllowed: admitted; the state was updated and its TTL set.
	StatusAllowed Status = 1
	// StatusDenied: refused; nothing was written.
	StatusDenied Status = 2
	// StatusClockUnsafe: server time is past ratelimit.MaxServerMillis or
	// behind lastObservedMillis by more than MaxClockRegression; nothing was
	// written.
	StatusClockUnsafe Status = 3
	// StatusStateIncompatible: the key holds something other than a valid
	// state hash of this program, schema and revision; nothing was written.
	StatusStateIncompatible Status = 4
	// StatusInvalid: the KEYS or ARGV were malformed or out of range; nothing
	// was written.
	StatusInvalid Status = 5
)

// String returns the status name used in docs/programs.md.
func (s Status) String() string {
	switch s {
	case StatusAllowed:
		return "ALLOWED"
	case StatusDenied:
		return "DENIED"
	case StatusClockUnsafe:
		return "CLOCK_UNSAFE"
	case StatusStateIncompatible:
		return "STATE_INCOMPATIBLE"
	case StatusInvalid:
		return "INVALID"
	case StatusReplayed:
		return "REPLAYED"
	case StatusDedupConflict:
		return "DEDUP_CONFLICT"
	}
	return fmt.Sprintf("Status(%d)", int64(s))
}

// Valid reports whether s is one of the seven statuses (the last two,
// StatusReplayed and StatusDedupConflict, only from the dedup programs).
func (s Status) Valid() bool { return s >= StatusAllowed && s <= StatusDedupConflict }

// Indices of the reply fields: every program returns exactly ReplyLen
// integers in this order.
const (
	ReplyStatus = iota
	ReplyServerNow
	ReplyEffectiveNow
	ReplyLimit
	ReplyRemaining
	ReplyRetryAfter
	ReplyResetAt
	// ReplyLen is the exact reply arity.
	ReplyLen
)

// Reply is a program's answer, field for field. Which fields are set depends
// on Status:
//   - StatusAllowed, StatusDenied: all of them. RetryAfterMillis is 0 when
//     allowed; ResetAtMillis is the server instant the state is back to full.
//   - StatusClockUnsafe with server time past MaxServerMillis: all 0.
//   - StatusClockUnsafe with a clock behind lastObservedMillis:
//     ServerNowMillis, EffectiveNowMillis = lastObservedMillis and
//     RetryAfterMillis = lastObserved - serverNow - MaxClockRegression (the
//     wait until the regression is tolerated again); the rest 0.
//   - StatusStateIncompatible, StatusInvalid: ServerNowMillis (0 when it is
//     past MaxServerMillis), the rest 0.
type Reply struct {
	Status             Status
	ServerNowMillis    int64
	EffectiveNowMillis int64
	Limit              int64
	Remaining          int64
	RetryAfterMillis   int64
	ResetAtMillis      int64
}

// ReplyOf builds a Reply from the reply integers in wire order.
func ReplyOf(v [ReplyLen]int64) Reply {
	return Reply{
		Status:             Status(v[ReplyStatus]),
		ServerNowMillis:    v[ReplyServerNow],
		EffectiveNowMillis: v[ReplyEffectiveNow],
		Limit:              v[ReplyLimit],
		Remaining:          v[ReplyRemaining],
		RetryAfterMillis:   v[ReplyRetryAfter],
		ResetAtMillis:      v[ReplyResetAt],
	}
}

// Ints returns the reply integers in wire order.
func (r Reply) Ints() [ReplyLen]int64 {
	return [ReplyLen]int64{
		ReplyStatus:       int64(r.Status),
		ReplyServerNow:    r.ServerNowMillis,
		ReplyEffectiveNow: r.EffectiveNowMillis,
		ReplyLimit:        r.Limit,
		ReplyRemaining:    r.Remaining,
		ReplyRetryAfter:   r.RetryAfterMillis,
		ReplyResetAt:      r.ResetAtMillis,
	}
}

// ExpiryMillis is the TTL, in ms, that the program sets on the state when it
// answers r under p: (ResetAt - ServerNow) + CleanupGrace for StatusAllowed,
// 0 (no write) otherwise.
func (r Reply) ExpiryMillis(p ratelimit.Policy) int64 {
	if r.Status != StatusAllowed {
		return 0
	}
	return r.ResetAtMillis - r.ServerNowMillis + p.CleanupGrace().Milliseconds()
}

// Waits splits RetryAfterMillis of a decision reply into what it means: a
// denial's retry-after, or an admission's delay (a leaky bucket's slot,
// ADR 0028; always 0 for the other algorithms).
func (r Reply) Waits() (retryAfter, delay time.Duration) {
	w := Millis(r.RetryAfterMillis)
	if r.Status == StatusAllowed {
		return 0, w
	}
	return w, 0
}

// Millis is ms milliseconds as a Duration, saturating at the longest one.
func Millis(ms int64) time.Duration {
	if ms > math.MaxInt64/int64(time.Millisecond) {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(ms) * time.Millisecond
}

// ErrMalformedReply is wrapped by every error Check returns.
var ErrMalformedReply = errors.New("malformed program reply")

var replyFieldNames = [ReplyLen]string{
	"status", "serverNowMillis", "effectiveNowMillis", "limit", "remaining", "retryAfterMillis", "resetAtMillis",
}

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrMalformedReply}, args...)...)
}

// Check reports whether r is a reply the program for p can give. Anything
// else is an error wrapping ErrMalformedReply, which a provider maps to
// Incompatible{malformed_reply}, never to an admission. It checks: a known
// status; every field in 0..MaxExactInt and server time within
// MaxServerMillis; for ALLOWED/DENIED the policy's limit, remaining <= limit
// (< limit when allowed), effectiveNow within [serverNow, serverNow +
// MaxClockRegression], retry 0 iff allowed, resetAt after effectiveNow by at
// most the policy's horizon and no earlier than the retry, and the
// algorithm's window alignment; for the other statuses the field layout that
// Reply documents.
func (r Reply) Check(p ratelimit.Policy) error {
	if p.IsZero() {
		return malformed("no policy to check against")
	}
	n := numbersOf(p)
	v := r.Ints()
	for i, x := range v {
		if x < 0 || x > ratelimit.MaxExactInt {
			return malformed("%s %d outside 0..%d", replyFieldNames[i], x, ratelimit.MaxExactInt)
		}
	}
	if r.ServerNowMillis > ratelimit.MaxServerMillis {
		return malformed("serverNowMillis %d > %d", r.ServerNowMillis, ratelimit.MaxServerMillis)
	}
	switch r.Status {
	case StatusAllowed, StatusDenied:
		return r.checkDecision(n)
	case StatusReplayed:
		// The recorded ALLOWED reply, with its own serverNow.
		if p.DedupWindow() == 0 {
			return malformed("%v for a policy without dedup", r.Status)
		}
		allowed := r
		allowed.Status = StatusAllowed
		return allowed.checkDecision(n)
	case StatusDedupConflict:
		if p.DedupWindow() == 0 {
			return malformed("%v for a policy without dedup", r.Status)
		}
		for i := ReplyEffectiveNow; i < ReplyLen; i++ {
			if v[i] != 0 {
				return malformed("%v with %s %d: want 0", r.Status, replyFieldNames[i], v[i])
			}
		}
		return nil
	case StatusClockUnsafe:
		if r.Limit != 0 || r.Remaining != 0 || r.ResetAtMillis != 0 {
			return malformed("%v with limit %d, remaining %d, resetAt %d: want 0", r.Status, r.Limit, r.Remaining, r.ResetAtMillis)
		}
		if r.EffectiveNowMillis == 0 {
			if r.ServerNowMillis != 0 || r.RetryAfterMillis != 0 {
				return malformed("%v past the server-time bound with serverNow %d, retryAfter %d: want 0", r.Status, r.ServerNowMillis, r.RetryAfterMillis)
			}
			return nil
		}
		if r.EffectiveNowMillis > ratelimit.MaxServerMillis {
			return malformed("%v lastObserved %d > %d", r.Status, r.EffectiveNowMillis, ratelimit.MaxServerMillis)
		}
		if r.EffectiveNowMillis-r.ServerNowMillis <= n.reg {
			return malformed("%v with regression %d ms within the tolerated %d ms", r.Status, r.EffectiveNowMillis-r.ServerNowMillis, n.reg)
		}
		if want := r.EffectiveNowMillis - r.ServerNowMillis - n.reg; r.RetryAfterMillis != want {
			return malformed("%v retryAfter %d, want %d", r.Status, r.RetryAfterMillis, want)
		}
		return nil
	case StatusStateIncompatible, StatusInvalid:
		for i := ReplyEffectiveNow; i < ReplyLen; i++ {
			if v[i] != 0 {
				return malformed("%v with %s %d: want 0", r.Status, replyFieldNames[i], v[i])
			}
		}
		return nil
	}
	return malformed("unknown status %d", int64(r.Status))
}

func (r Reply) checkDecision(n numbers) error {
	eff, reset := r.EffectiveNowMillis, r.ResetAtMillis
	switch {
	case r.Limit != n.limit:
		return malformed("limit %d, policy has %d", r.Limit, n.limit)
	case r.Remaining > r.Limit:
		return malformed("remaining %d > limit %d", r.Remaining, r.Limit)
	case r.Status == StatusAllowed && r.Remaining == r.Limit:
		return malformed("allowed with remaining %d = limit", r.Remaining)
	case eff < r.ServerNowMillis:
		return malformed("effectiveNow %d < serverNow %d", eff, r.ServerNowMillis)
	case eff-r.ServerNowMillis > n.reg:
		return malformed("effectiveNow %d ahead of serverNow %d by more than %d ms", eff, r.ServerNowMillis, n.reg)
	case eff > ratelimit.MaxServerMillis:
		return malformed("effectiveNow %d > %d", eff, ratelimit.MaxServerMillis)
	case reset <= eff:
		return malformed("resetAt %d <= effectiveNow %d", reset, eff)
	case reset-eff > n.horizon():
		return malformed("resetAt %d more than %d ms after effectiveNow %d", reset, n.horizon(), eff)
	case r.Status == StatusAllowed && r.RetryAfterMillis != 0 && n.alg != ratelimit.AlgorithmLeakyBucket:
		return malformed("allowed with retryAfter %d", r.RetryAfterMillis)
	case r.Status == StatusAllowed && r.RetryAfterMillis > n.longestDelayMs:
		// A leaky bucket's delay (ADR 0028) is at most its longest.
		return malformed("allowed with delay %d ms, beyond the queue's longest %d ms", r.RetryAfterMillis, n.longestDelayMs)
	case r.Status == StatusDenied && r.RetryAfterMillis == 0:
		return malformed("denied with retryAfter 0")
	case r.RetryAfterMillis > reset-eff:
		return malformed("retryAfter %d beyond resetAt %d - effectiveNow %d", r.RetryAfterMillis, reset, eff)
	}
	switch n.alg {
	case ratelimit.AlgorithmFixedWindow:
		if want := (eff/n.win + 1) * n.win; reset != want {
			return malformed("resetAt %d is not the window end %d", reset, want)
		}
		if r.Status == StatusDenied && r.RetryAfterMillis != reset-eff {
			return malformed("denied retryAfter %d, want the window end in %d", r.RetryAfterMillis, reset-eff)
		}
	case ratelimit.AlgorithmSlidingWindowCounter:
		k := eff / n.win
		if reset != (k+2)*n.win && (r.Status == StatusAllowed || reset != (k+1)*n.win) {
			return malformed("resetAt %d is not a window end after window %d", reset, k)
		}
	case ratelimit.AlgorithmSlidingLog:
		// An admission's entry leaves one window after eff (a full log's
		// charge appends none: its newest entry is earlier).
		if r.Status == StatusAllowed && reset != eff+n.win && r.Remaining != 0 {
			return malformed("allowed resetAt %d, want effectiveNow + window %d", reset, eff+n.win)
		}
	}
	return nil
}

// numbers are a policy's parameters in the integer milliseconds the programs
// receive.
type numbers struct {
	alg        ratelimit.Algorithm
	limit      int64 // limit or capacity
	win        int64 // window (fixed, sliding)
	rate, per  int64 // refill tokens, refill period (token bucket); reduced rate, period in µs (GCRA)
	grace, reg int64
	fullScaled int64 // token bucket: C*P; GCRA: B*P
	// delayAfterScaled is a leaky bucket's delayAfter emission intervals,
	// delayAfter*P in 1/R µs (ADR 0028).
	delayAfterScaled int64
	horizonMs        int64 // ratelimit.Policy.HorizonMillis
	// longestDelayMs bounds a leaky bucket's delay (LeakyBucket.LongestDelay).
	longestDelayMs int64
}

func numbersOf(p ratelimit.Policy) numbers {
	n := numbers{
		alg:       p.Algorithm(),
		limit:     p.Limit(),
		grace:     p.CleanupGrace().Milliseconds(),
		reg:       p.MaxClockRegression().Milliseconds(),
		horizonMs: p.HorizonMillis(),
	}
	if tokens, period, ok := p.Refill(); ok {
		n.rate, n.per = tokens, period
		n.fullScaled = n.limit * n.per // T1
	} else if rate, per, _, ok := p.Emission(); ok {
		n.rate, n.per = rate, per
		n.fullScaled = n.limit * n.per // G1: the burst offset B*P
		if q, ok := p.Params().(ratelimit.LeakyBucket); ok {
			n.delayAfterScaled = q.DelayAfter * n.per // < B*P (G1)
			n.longestDelayMs = q.LongestDelay().Milliseconds()
		}
	} else {
		n.win = p.WindowMillis()
	}
	return n
}

// horizon bounds resetAt - effectiveNow: one window (F2, L2), two windows
// (S3), the time to fill from empty (T2), the time to full plus 1 ms (G2).
func (n numbers) horizon() int64 { return n.horizonMs }

// ReplyError reports a program reply that is not exactly ReplyLen integers
// or that fails Reply.Check (then Err is that error). Reply is a bounded
// rendering of what arrived (%#v style, at most maxRenderLen bytes), safe to
// log: the programs never return a key, a subject or a secret.
type ReplyError struct {
	// Reason says what is wrong with the shape; empty when Err is set.
	Reason string
	// Reply is the bounded rendering of the value.
	Reply string
	// Err is Reply.Check's error, or nil for a shape error.
	Err error
}

// Error renders "programs: malformed program reply: <why>: <reply>".
func (e *ReplyError) Error() string {
	if e.Err != nil {
		return "programs: " + e.Err.Error() + ": " + e.Reply
	}
	return "programs: " + ErrMalformedReply.Error() + ": " + e.Reason + ": " + e.Reply
}

// Unwrap exposes ErrMalformedReply and the Check error to errors.Is.
func (e *ReplyError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrMalformedReply}
	}
	return []error{ErrMalformedReply, e.Err}
}

// Decode converts the value go-redis read for a program call into a Reply
// for p. The value must be a []any of exactly ReplyLen int64 elements (Lua
// integer tables arrive that way under RESP2 and RESP3); anything else (a
// string, nil, a nested array, a float, a map, bulk digits, a wrong arity)
// is a *ReplyError. The field rules (range, status, consistency) are
// Check's, and a reply that fails them is a *ReplyError wrapping Check's
// error. On a valid reply it does not allocate. It needs no go-redis types:
// the value is what go-redis hands over as an any.
func Decode(v any, p ratelimit.Policy) (Reply, error) {
	arr, ok := v.([]any)
	if !ok {
		return Reply{}, replyError(v, "want an array of %d integers, got %s", ReplyLen, typeName(v))
	}
	if len(arr) != ReplyLen {
		return Reply{}, replyError(v, "want %d elements, got %d", ReplyLen, len(arr))
	}
	var ints [ReplyLen]int64
	for i, e := range arr {
		n, ok := e.(int64)
		if !ok {
			return Reply{}, replyError(v, "element %d: want an integer, got %s", i, typeName(e))
		}
		ints[i] = n
	}
	r := ReplyOf(ints)
	if err := r.Check(p); err != nil {
		return Reply{}, &ReplyError{Reply: render(v), Err: err}
	}
	return r, nil
}

func replyError(v any, format string, args ...any) error {
	return &ReplyError{Reason: fmt.Sprintf(format, args...), Reply: render(v)}
}

func typeName(v any) string {
	if v == nil {
		return "nil"
	}
	return fmt.Sprintf("%T", v)
}

// Bounds of render.
const (
	maxRenderLen      = 256 // bytes of output
	maxRenderElements = 8   // elements shown per array or map
	maxRenderString   = 32  // bytes shown per string
	maxRenderDepth    = 3
)

// render formats v like %#v for the shapes go-redis produces, bounded in
// output size and in work: huge strings and arrays are truncated without
// being copied or fully traversed.
func render(v any) string {
	var b strings.Builder
	renderTo(&b, v, 0)
	s := b.String()
	if len(s) > maxRenderLen {
		s = s[:maxRenderLen] + "..."
	}
	return s
}

func renderTo(b *strings.Builder, v any, depth int) {
	if b.Len() > maxRenderLen {
		return
	}
	switch x := v.(type) {
	case nil:
		b.WriteString("<nil>")
	case int64:
		b.WriteString("int64(")
		b.WriteString(strconv.FormatInt(x, 10))
		b.WriteString(")")
	case string:
		b.WriteString(strconv.Quote(truncate(x)))
		if len(x) > maxRenderString {
			fmt.Fprintf(b, "(%d bytes)", len(x))
		}
	case []byte:
		fmt.Fprintf(b, "[]byte(%q)", truncate(string(x[:min(len(x), maxRenderString+1)])))
	case []any:
		if depth >= maxRenderDepth {
			fmt.Fprintf(b, "[]interface {}(len %d)", len(x))
			return
		}
		b.WriteString("[]interface {}{")
		for i, e := range x {
			if i == maxRenderElements {
				fmt.Fprintf(b, ", ...(%d more)", len(x)-i)
				break
			}
			if i > 0 {
				b.WriteString(", ")
			}
			renderTo(b, e, depth+1)
		}
		b.WriteString("}")
	case map[any]any:
		fmt.Fprintf(b, "map[interface {}]interface {}(len %d)", len(x))
	case map[string]any:
		fmt.Fprintf(b, "map[string]interface {}(len %d)", len(x))
	case bool, float64, float32, int, int32, uint64:
		fmt.Fprintf(b, "%#v", x)
	case error:
		fmt.Fprintf(b, "error(%q)", truncate(x.Error()))
	default:
		fmt.Fprintf(b, "%T", x)
	}
}

func truncate(s string) string {
	if len(s) > maxRenderString {
		return s[:maxRenderString] + "..."
	}
	return s
}
