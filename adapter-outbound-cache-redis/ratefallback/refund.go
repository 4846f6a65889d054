package ratefallback

import (
	"context"
	"fmt"
	"time"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/programs"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// Refund implements ratelimit.EdgePort (ADR 0025). A receipt of a local
// decision (Source LocalEmergency) is given back on this instance's table,
// exactly and saturating as the refund programs do (programs.RefundMicros
// on the subject's local share), and what it gives back no longer needs
// charging to Redis; a receipt of another revision, or of a subject with
// no local state any more, gives back nothing. A receipt of a Redis
// decision goes to the provider. A zero receipt, or one of another policy,
// is Unavailable{invalid_request}. It never panics and never returns nil.
func (f *Fallback) Refund(ctx context.Context, req ratelimit.Request, r ratelimit.Receipt) (out ratelimit.Outcome) {
	defer ratelimit.Recover(&out, req.PolicyID, "ratefallback")
	if r.Source() != ratelimit.LocalEmergency {
		return f.p.Refund(ctx, req, r)
	}
	lp := f.local[req.PolicyID]
	if lp == nil || r.PolicyID() != req.PolicyID || r.Cost() < 1 || r.Cost() > lp.share.Limit() {
		return ratelimit.Unavailable{PolicyID: req.PolicyID.Known(), Category: ratelimit.CategoryInvalidRequest,
			Cause: fmt.Errorf("ratefallback: %w: %v for policy %q", ratelimit.ErrInvalidReceipt, r, req.PolicyID.Known())}
	}
	d := ratelimit.Decision{Allowed: true, Limit: lp.share.Limit(), PolicyID: lp.global.ID(), PolicyRevision: lp.global.Revision(),
		Source: ratelimit.LocalEmergency, Certainty: ratelimit.ApproximateLocal}
	if r.Revision() != lp.global.Revision() {
		return ratelimit.Evaluated{Decision: d}
	}
	req = req.ScopedTo(lp.global)
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
