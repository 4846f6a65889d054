package edge

import (
	"context"
	"net/http"
	"time"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// serveHolding runs next for a request admitted by a target with a
// concurrency limit (ADR 0041) and gives the slots back when next returns,
// whatever way it returns: normally, by a panic (given back, then the
// panic goes on to net/http), or after the client left (given back on a
// context of its own: giveBack). next's context ends at the hold's end,
// ratelimit.HoldEnd: maxHold after the whole millisecond of sent, the
// instant the decision was sent. The server counts the hold from its
// admission's millisecond, no earlier than sent's, so a handler that
// honours its context has stopped before its slot can be reclaimed. A
// release that fails leaves the slot held until maxHold, which can only
// under-admit.
func (m *Middleware) serveHolding(w http.ResponseWriter, r *http.Request, next http.Handler, t *target, req ratelimit.Request, o ratelimit.Evaluated, sent time.Time) {
	ctx, cancel := context.WithDeadline(r.Context(), ratelimit.HoldEnd(sent, t.holds))
	defer cancel()
	defer m.release(r.Context(), t, req, o)
	next.ServeHTTP(w, r.WithContext(ctx))
}

// release gives back every slot o holds: the decision's for one policy,
// each holding member's for a policy set (Evaluated.Members, in the
// set's order).
func (m *Middleware) release(ctx context.Context, t *target, req ratelimit.Request, o ratelimit.Evaluated) {
	if t.members == nil {
		if m.holding[o.Decision.PolicyID] {
			m.giveBack(ctx, req, o.Decision)
		}
		return
	}
	for i, d := range o.Members {
		if i < len(t.members) && m.holding[d.PolicyID] {
			member := req
			member.PolicyID = t.members[i]
			m.giveBack(ctx, member, d)
		}
	}
}
