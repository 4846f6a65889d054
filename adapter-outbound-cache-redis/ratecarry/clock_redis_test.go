package ratecarry_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// TestReloadMidWindowWithAControlledClock (issue 36, done when): for
// every algorithm, and across a change of algorithm, on a real server
// whose clock the test moves (redistest WithClock), with one-minute
// periods: a subject spends revision 1 (5), revision 2 (20) takes over 20 s
// into the window through the Carrier, and the subject spends what it can
// then and again 20 s later; in all it is admitted at most max(5, 20) plus
// what the revisions add over the interval on the server's clock (the Go
// model's refill: revision 1's before the change, revision 2's after).
// Lowering: a subject that spent 8 of a revision-1 limit of 20 is denied
// at revision 2's (5) next decision, and has 5 again two minutes on.
func TestReloadMidWindowWithAControlledClock(t *testing.T) {
	for _, ch := range changes() {
		t.Run(ch.name, func(t *testing.T) {
			t.Parallel()
			srv := redistest.Start(t, redistest.WithClock())
			clock := srv.Clock()
			// One second into a minute, by the server's clock: the steps
			// below (under a minute with the advances) never cross a
			// one-minute window's boundary where the test does not mean
			// one.
			clock.AdvanceToPhase(t, time.Minute, time.Second)
			keys := redistest.RandomKeys(t)
			rc := clientAt(t, srv.Addr())
			over := func(alg string, rev, limit int64) ratelimit.Policy {
				return policy(t, polAPI, rev, algorithmNamed(t, alg).Over(limit, time.Minute))
			}

			// Raise: 5 -> 20.
			old, neu := over(ch.from, 1, 5), over(ch.to, 2, 20)
			prov1, prov2 := provider(t, rc, keys, old), provider(t, rc, keys, neu)
			c := carrier(t, prov2, rc, keys, &observed{}, [2]ratelimit.Policy{neu, old})
			subject := randomSubject(t)
			start := serverMillis(t, rc, false)
			admitted := countUntilDenied(t, prov1, polAPI, subject, 40)
			require.GreaterOrEqual(t, admitted, int64(5))
			clock.Advance(t, 20*time.Second)
			change := serverMillis(t, rc, false)
			admitted += countUntilDenied(t, c, polAPI, subject, 40)
			clock.Advance(t, 20*time.Second)
			admitted += countUntilDenied(t, c, polAPI, subject, 40)
			end := serverMillis(t, rc, true)
			assert.LessOrEqual(t, admitted, 20+adds(neu, change, end)+adds(old, start, change),
				"admitted over the window of the reload: at most max(5, 20) plus what they add")

			// Lower: 20 -> 5 with 8 spent.
			keys = redistest.RandomKeys(t)
			old, neu = over(ch.from, 1, 20), over(ch.to, 2, 5)
			prov1, prov2 = provider(t, rc, keys, old), provider(t, rc, keys, neu)
			c = carrier(t, prov2, rc, keys, &observed{}, [2]ratelimit.Policy{neu, old})
			subject = randomSubject(t)
			for range 8 {
				require.True(t, admitted3(t, prov1, subject))
			}
			clock.Advance(t, 10*time.Second)
			assert.False(t, admitted3(t, c, subject), "lowered at the next decision")
			clock.Advance(t, 2*time.Minute)
			assert.GreaterOrEqual(t, countUntilDenied(t, c, polAPI, subject, 40), int64(4), "revision 2's budget is back after its window")
		})
	}
}

// admitted3 reports whether one decision of polAPI for subject admitted.
func admitted3(t *testing.T, p ratelimit.EdgePort, subject ratelimit.SubjectDigest) bool {
	t.Helper()
	return admitted(t, ask(p, polAPI, subject))
}
