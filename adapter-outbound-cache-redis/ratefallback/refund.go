package ratefallback

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/programs"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

var _ ratelimit.Refunder = (*Fallback)(nil)

// errNoRefunder is the cause of the Incompatible outcome Refund answers
// for a Redis receipt when the provider cannot refund.
var errNoRefunder = errors.New("ratefallback: the provider does not implement ratelimit.Refunder")

// Refund implements ratelimit.Refunder (ADR 0025). A receipt of a local
// decision (Source LocalEmergency) is given back on this instance's table,
// exactly and saturating as the refund programs do (programs.RefundMicros
// on the subject's local share), and what it gives back no longer needs
// charging to Redis; a receipt of another revision, or of a subject with
// no local state any more, gives back nothing. A receipt of a Redis
// decision goes to the provider. A zero receipt, or one of another policy,
// is Unavailable{invalid_request}. It never panics and never returns nil.
func (f *Fallback) Refund(ctx context.Context, req ratelimit.Request, r ratelimit.Receipt) (out ratelimit.Outcome) {
	defer func() {
		if rec := recover(); rec != nil {
			out = ratelimit.Incompatible{PolicyID: knownID(req.PolicyID), Category: ratelimit.CategoryProgramFault,
				Cause: fmt.Errorf("ratefallback: panic: %.200s", fmt.Sprint(rec))}
		}
	}()
	if r.Source() != ratelimit.LocalEmergency {
		inner, ok := f.p.(ratelimit.Refunder)
		if !ok {
			return ratelimit.Incompatible{PolicyID: knownID(req.PolicyID), Category: ratelimit.CategoryProgramFault, Cause: errNoRefunder}
		}
		return inner.Refund(ctx, req, r)
	}
	lp := f.local[req.PolicyID]
	if lp == nil || r.PolicyID() != req.PolicyID || r.Cost() < 1 || r.Cost() > lp.share.Limit() {
		return ratelimit.Unavailable{PolicyID: knownID(req.PolicyID), Category: ratelimit.CategoryInvalidRequest,
			Cause: fmt.Errorf("ratefallback: %w: %v for policy %q", ratelimit.ErrInvalidReceipt, r, knownID(req.PolicyID))}
	}
	d := ratelimit.Decision{Allowed: true, Limit: lp.share.Limit(), PolicyID: lp.global.ID(), PolicyRevision: lp.global.Revision(),
		Source: ratelimit.LocalEmergency, Certainty: ratelimit.ApproximateLocal}
	if r.Revision() != lp.global.Revision() {
		return ratelimit.Evaluated{Decision: d}
	}
	req.SubjectDigest = lp.global.Subject(req.SubjectDigest)
	nowT := f.now()
	f.mu.Lock()
	defer f.mu.Unlock()
	e := f.table[entryKey(req)]
	if e == nil || e.state == nil || nowT.UnixMilli() >= e.expiresAt {
		d.Remaining = d.Limit
		return ratelimit.Evaluated{Decision: d}
	}
	rep, next := programs.RefundMicros(lp.share, e.state, nowT.UnixMicro(), r.Cost(), r.AtMillis())
	if rep.Status != programs.StatusAllowed {
		return ratelimit.Evaluated{Decision: d} // the local clock went back: nothing given back
	}
	back := rep.RetryAfterMillis // the refund's units given back (ADR 0025)
	e.state = next
	e.pending -= min(back, e.pending)
	d.Refunded, d.Remaining, d.ResetAt = back, rep.Remaining, time.UnixMilli(rep.ResetAtMillis)
	return ratelimit.Evaluated{Decision: d}
}
