package programs

import (
	"errors"
	"fmt"

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
	case r.Status == StatusAllowed && r.RetryAfterMillis != 0:
		return malformed("allowed with retryAfter %d", r.RetryAfterMillis)
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
	horizonMs  int64 // ratelimit.Policy.HorizonMillis
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
	} else {
		n.win = p.WindowMillis()
	}
	return n
}

// horizon bounds resetAt - effectiveNow: one window (F2), two windows (S3),
// the time to fill from empty (T2), the time to full plus 1 ms (G2).
func (n numbers) horizon() int64 { return n.horizonMs }
