package reliability_test

// The toxiproxy fault lane: an in-process toxiproxy (github.com/Shopify/
// toxiproxy/v2 as a library) between the provider and a private
// redis-server. The provider talks to the proxy; the checks afterwards use
// the server's own admin client (direct, no proxy): INFO commandstats calls
// of evalsha/eval equal the client's attempts (no re-send ever) and the
// state key holds exactly what the server ran.

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redisrate"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// TestToxicReplyLostAfterExecution: the request reaches the server, the
// reply is lost on the way back. Indeterminate, and the server ran the
// program exactly once (no re-send, count = the cost).
func TestToxicReplyLostAfterExecution(t *testing.T) {
	srv := redistest.Start(t)
	admin := srv.Client()
	proxy := startProxy(t, srv.Addr())
	tests := []struct {
		name     string
		toxic    string
		category ratelimit.Category
	}{
		{"downstream timeout 0 (reply swallowed)", `{"type":"timeout","stream":"downstream","attributes":{"timeout":0}}`, ratelimit.CategoryTimeout},
		{"downstream reset_peer 0 (RST on the reply)", `{"type":"reset_peer","stream":"downstream","attributes":{"timeout":0}}`, ratelimit.CategoryConnectionLost},
		{"downstream limit_data 0 (closed on the reply)", `{"type":"limit_data","stream":"downstream","attributes":{"bytes":0}}`, ratelimit.CategoryConnectionLost},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			keys := randomKeys(t)
			pols := hourPolicies(t)
			pol := pols[0]
			p := newProvider(t, clientConfig(proxy.Listen, faultTimeout, 4), keys, pols...) // Start warmed one connection
			subject := randomSubject(t)
			resetStats(t, admin)
			remove := addToxic(t, proxy, tt.toxic)
			out := ask(p, pol.ID(), subject, 2)
			remove()
			assert.Equal(t, ratelimit.KindIndeterminate, out.Kind(), "%v", out)
			assert.Equal(t, tt.category, ratelimit.CategoryOf(out), "%v", out)
			assert.False(t, ratelimit.Admitted(out))
			assert.Equal(t, 1, calls(t, admin, "evalsha"), "the server ran the call once")
			assert.Equal(t, 0, calls(t, admin, "eval"), "no fallback, no re-send")
			c, ok := consumed(t, admin, keys, pol, subject)
			require.True(t, ok, "the mutation happened")
			assert.Equal(t, int64(2), c)
			out = ask(p, pol.ID(), subject, 1) // fresh connection through the now clean proxy
			require.True(t, ratelimit.Admitted(out), "%v", out)
			assert.Equal(t, int64(2), out.(ratelimit.Evaluated).Decision.Remaining, "5 - 2 (lost reply) - 1")
			assert.Equal(t, 2, calls(t, admin, "evalsha"))
		})
	}
}

// TestToxicRequestCutMidFrame: the proxy forwards only the first bytes of
// the EVALSHA frame and closes. Indeterminate (the bytes left the process),
// although the truth is "not run": the key is unchanged, nothing re-sent.
func TestToxicRequestCutMidFrame(t *testing.T) {
	srv := redistest.Start(t)
	admin := srv.Client()
	proxy := startProxy(t, srv.Addr())
	for _, pol := range hourPolicies(t) {
		t.Run(pol.Algorithm().String(), func(t *testing.T) {
			keys := randomKeys(t)
			p := newProvider(t, clientConfig(proxy.Listen, faultTimeout, 4), keys, hourPolicies(t)...)
			subject := randomSubject(t)
			resetStats(t, admin)
			remove := addToxic(t, proxy, `{"type":"limit_data","stream":"upstream","attributes":{"bytes":24}}`)
			out := ask(p, pol.ID(), subject, 2)
			remove()
			assert.Equal(t, ratelimit.KindIndeterminate, out.Kind(), "%v", out)
			assert.Equal(t, ratelimit.CategoryConnectionLost, ratelimit.CategoryOf(out), "%v", out)
			var ce *redisrate.CallError
			require.ErrorAs(t, out.(ratelimit.Indeterminate).Cause, &ce)
			assert.True(t, ce.Written)
			time.Sleep(50 * time.Millisecond)
			assert.Equal(t, 0, calls(t, admin, "evalsha"), "a cut frame never runs")
			assert.Equal(t, 0, calls(t, admin, "eval"), "and is not re-sent")
			_, ok := consumed(t, admin, keys, pol, subject)
			assert.False(t, ok, "key unchanged (absent)")
			out = ask(p, pol.ID(), subject, 1)
			require.True(t, ratelimit.Admitted(out), "%v", out)
			assert.Equal(t, int64(4), out.(ratelimit.Evaluated).Decision.Remaining, "nothing was consumed by the cut call")
		})
	}
}

// TestToxicLatencyAboveTimeout: the reply path is slower than the command
// timeout. Indeterminate{timeout}, and the mutation happened: Unavailable
// would have been a lie.
func TestToxicLatencyAboveTimeout(t *testing.T) {
	srv := redistest.Start(t)
	admin := srv.Client()
	proxy := startProxy(t, srv.Addr())
	keys := randomKeys(t)
	pols := hourPolicies(t)
	p := newProvider(t, clientConfig(proxy.Listen, faultTimeout, 4), keys, pols...)
	for _, pol := range pols {
		t.Run(pol.Algorithm().String(), func(t *testing.T) {
			// The previous subtest's timed-out connection was discarded: warm
			// a new one, else the latency hits the handshake (Unavailable,
			// the fresh-connection row of TestServiceReadTimeoutIsIndeterminateAndTheCallRan).
			require.True(t, ratelimit.Admitted(ask(p, pol.ID(), randomSubject(t), 1)))
			subject := randomSubject(t)
			resetStats(t, admin)
			remove := addToxic(t, proxy, fmt.Sprintf(`{"type":"latency","stream":"downstream","attributes":{"latency":%d}}`, (3*faultTimeout).Milliseconds()))
			start := time.Now()
			out := ask(p, pol.ID(), subject, 2)
			elapsed := time.Since(start)
			remove()
			assert.Equal(t, ratelimit.KindIndeterminate, out.Kind(), "%v", out)
			assert.Equal(t, ratelimit.CategoryTimeout, ratelimit.CategoryOf(out), "%v", out)
			assert.Less(t, elapsed, 3*faultTimeout, "the read timeout ends the wait, not the late reply")
			assert.Equal(t, 1, calls(t, admin, "evalsha"))
			c, ok := consumed(t, admin, keys, pol, subject)
			require.True(t, ok, "the timed-out call was applied")
			assert.Equal(t, int64(2), c, "applied exactly once")
		})
	}
}
