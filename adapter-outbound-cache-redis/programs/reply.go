package programs

import (
	"fmt"
	"math"
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
