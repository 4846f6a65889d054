package programs

import (
	"errors"
	"fmt"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

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
	case r.Status == StatusAllowed && r.RetryAfterMillis != 0 && !n.delays:
		return malformed("allowed with retryAfter %d", r.RetryAfterMillis)
	case r.Status == StatusAllowed && r.RetryAfterMillis > n.longestDelayMs:
		// A leaky bucket's delay (ADR 0028) is at most its longest.
		return malformed("allowed with delay %d ms, beyond the queue's longest %d ms", r.RetryAfterMillis, n.longestDelayMs)
	case r.Status == StatusDenied && r.RetryAfterMillis == 0:
		return malformed("denied with retryAfter 0")
	case r.RetryAfterMillis > reset-eff:
		return malformed("retryAfter %d beyond resetAt %d - effectiveNow %d", r.RetryAfterMillis, reset, eff)
	}
	if check := modelOf(n.alg).checkDecision; check != nil {
		return check(n, r)
	}
	return nil
}
