package edge

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/tech-log/tech-log-backend/adapter-inbound-web/internal/problem"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// DelayHeader is the request header a handler reads to learn that the
// edge held its request for a leaky-bucket policy (ADR 0028): the delay
// waited, in whole milliseconds. The edge removes the header from every
// rate-limited request before it sets it, so a handler never sees one a
// client sent. The response to a held request carries it as well.
const DelayHeader = "Ratelimit-Delay"

type delayKey struct{}

// DelayFrom returns how long the edge held the request in ctx for its slot
// in a leaky-bucket queue (ADR 0028); ok is false when it was not held.
func DelayFrom(ctx context.Context) (delay time.Duration, ok bool) {
	delay, ok = ctx.Value(delayKey{}).(time.Duration)
	return delay, ok
}

// hold waits out an admitted request's delay, its slot in a leaky-bucket
// queue, counted from when the decision arrived (the server reckoned the
// delay from its own instant before that, so the request never leaves
// early). It returns the request to pass on, with the delay in DelayHeader
// and its context; the response carries DelayHeader too. When the
// request's context ends first (the client went away, or the caller's
// deadline passed), the slot is given back with the decision's receipt so
// the next request takes it, the request is answered 503 and not passed
// on, and ok is false.
func (m *Middleware) hold(w http.ResponseWriter, r *http.Request, req ratelimit.Request, d ratelimit.Decision, obs *Observation) (held *http.Request, ok bool) {
	obs.Delay = d.Delay
	timer := time.NewTimer(d.Delay)
	defer timer.Stop()
	select {
	case <-timer.C:
		ms := strconv.FormatInt(d.Delay.Milliseconds(), 10)
		r.Header.Set(DelayHeader, ms)
		w.Header().Set(DelayHeader, ms) // and the client: its request waited
		return r.WithContext(context.WithValue(r.Context(), delayKey{}, d.Delay)), true
	case <-r.Context().Done():
	}
	obs.Abandoned = true
	obs.Refunded = m.giveBack(r.Context(), req, d)
	obs.Status = http.StatusServiceUnavailable
	p := problem.New(http.StatusServiceUnavailable, "request left the rate-limit queue before its slot")
	p.Outcome, p.Category, p.Policy = string(ratelimit.KindEvaluated), string(ratelimit.CategoryCancelled), string(req.PolicyID)
	problem.Write(w, p)
	return nil, false
}

// giveBack refunds the admission d through the port on a context that
// outlives the request's, bounded by the edge's timeout
// (ratelimit.RefundDetached). It reports whether the refund was
// evaluated; a decision without a receipt, or a refund that fails, leaves
// the charge in place, which can only under-admit.
func (m *Middleware) giveBack(ctx context.Context, req ratelimit.Request, d ratelimit.Decision) bool {
	if d.Receipt.IsZero() {
		return false
	}
	out := ratelimit.RefundDetached(ctx, m.port, req, d.Receipt, m.now(), m.timeout)
	return out != nil && out.Kind() == ratelimit.KindEvaluated
}
