package ratelimit_test

import (
	"testing"
	"time"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

func TestDecisionResetAfter(t *testing.T) {
	server := time.UnixMilli(1_800_000_000_000)
	for _, c := range []struct {
		name      string
		d         ratelimit.Decision
		want      time.Duration
		wantKnown bool
	}{
		{"from the server's own clock", ratelimit.Decision{ServerNow: server, ResetAt: server.Add(1500 * time.Millisecond)}, 1500 * time.Millisecond, true},
		{"never negative", ratelimit.Decision{ServerNow: server, ResetAt: server.Add(-time.Second)}, 0, true},
		{"unknown server now", ratelimit.Decision{ResetAt: server}, 0, false},
	} {
		got, known := c.d.ResetAfter()
		if got != c.want || known != c.wantKnown {
			t.Errorf("%s: ResetAfter() = %v, %v; want %v, %v", c.name, got, known, c.want, c.wantKnown)
		}
	}
}
