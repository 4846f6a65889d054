package reliability_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// TestAdmissionAndDeadlineSendNothing: on a real server, a caller deadline
// shorter than the command timeout is Unavailable{deadline}, and a call
// beyond MaxInFlight (while one call is held in flight by a latency toxic)
// is Unavailable{admission} at once; INFO commandstats shows that neither
// sent an EVALSHA.
func TestAdmissionAndDeadlineSendNothing(t *testing.T) {
	srv := redistest.Start(t)
	admin := srv.Client()
	proxy := startProxy(t, srv.Addr())
	keys := randomKeys(t)
	pols := hourPolicies(t)
	pol := pols[0]
	p := newProvider(t, clientConfig(proxy.Listen, 2*time.Second, 1), keys, pols...) // PoolSize = MaxInFlight = 1

	t.Run("deadline shorter than the command timeout", func(t *testing.T) {
		resetStats(t, admin)
		subject := randomSubject(t)
		out := p.Evaluate(context.Background(), ratelimit.Request{PolicyID: pol.ID(), SubjectDigest: subject, Cost: 1, Deadline: time.Now().Add(time.Second)})
		assert.Equal(t, ratelimit.KindUnavailable, out.Kind(), "%v", out)
		assert.Equal(t, ratelimit.CategoryDeadline, ratelimit.CategoryOf(out), "%v", out)
		assert.Equal(t, 0, calls(t, admin, "evalsha")+calls(t, admin, "eval"), "nothing sent")
		_, ok := consumed(t, admin, keys, pol, subject)
		assert.False(t, ok)
	})
	t.Run("in-flight bound full", func(t *testing.T) {
		resetStats(t, admin)
		addToxic(t, proxy, `{"type":"latency","stream":"downstream","attributes":{"latency":400}}`)
		held := make(chan ratelimit.Outcome, 1)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			held <- ask(p, pol.ID(), randomSubject(t), 1)
		}()
		require.Eventually(t, func() bool { return calls(t, admin, "evalsha") == 1 }, 2*time.Second, 5*time.Millisecond, "the first call is in flight")
		start := time.Now()
		out := ask(p, pol.ID(), randomSubject(t), 1)
		waited := time.Since(start)
		assert.Equal(t, ratelimit.KindUnavailable, out.Kind(), "%v", out)
		assert.Equal(t, ratelimit.CategoryAdmission, ratelimit.CategoryOf(out), "%v", out)
		assert.Less(t, waited, 300*time.Millisecond, "answered at once, not after the held call")
		wg.Wait()
		first := <-held
		assert.True(t, ratelimit.Admitted(first), "%v", first)
		assert.Equal(t, 1, calls(t, admin, "evalsha"), "the refused call sent nothing")
	})
}
