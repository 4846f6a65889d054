package edge

import (
	"net/http"
	"time"

	"github.com/tech-log/tech-log-backend/adapter-inbound-web/internal/fields"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// setDecisionFields writes the RateLimit fields of an evaluated decision
// (package fields owns their syntax). The time to reset is the decision's
// own server-time span, ResetAt - ServerNow, so a skew between this host's
// clock and the coordination server's does not shift it; only a port that
// does not report ServerNow falls back to ResetAt - now on this host's
// clock.
func (m *Middleware) setDecisionFields(h http.Header, t *target, d ratelimit.Decision, now time.Time) {
	reset, ok := d.ResetAfter()
	if !ok {
		reset = d.ResetAt.Sub(now)
	}
	fields.Set(h, fields.Bucket{
		Policy:    string(t.policy),
		Quota:     d.Limit,
		Remaining: d.Remaining,
		Reset:     reset,
		Window:    t.window,
	}, m.legacy)
}
