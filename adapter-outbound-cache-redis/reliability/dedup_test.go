package reliability_test

import (
	"context"
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redisrate"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
	"github.com/tech-log/tech-log-backend/shared-contract/keyspace"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// dedupPolicies are hourPolicies with a 10 minute dedup window (and the
// default DedupMaxReplays, 1).
func dedupPolicies(t testing.TB) []ratelimit.Policy {
	var out []ratelimit.Policy
	for _, p := range hourPolicies(t) {
		q, err := ratelimit.NewPolicy(ratelimit.PolicySpec{
			ID: p.ID(), Revision: p.Revision(), Algorithm: p.Algorithm(), Params: p.Params(), MaxCost: p.MaxCost(),
			CleanupGrace: p.CleanupGrace(), MaxClockRegression: p.MaxClockRegression(),
			FailurePolicy: ratelimit.FailClosed, DedupWindow: 10 * time.Minute,
		})
		require.NoError(t, err)
		out = append(out, q)
	}
	return out
}

// dedupDeadline is the service's derived evaluation deadline for a policy
// with a dedup window at the default command timeout.
var dedupDeadline = redisrate.EvaluationTimeout(redisrate.DefaultCommandTimeout, true)

// lossyProvider is a started Provider at the service's default timeouts whose connections go through proxy
// until direct is set, and straight to the server after: a reply dropped
// on a proxied connection is lost, and the retry's new connection is not.
func lossyProvider(t *testing.T, proxy, server string, keys *keyspace.Builder, pols []ratelimit.Policy) (*redisrate.Provider, *atomic.Bool) {
	t.Helper()
	cfg := clientConfig(proxy, redisrate.DefaultCommandTimeout, 4)
	cfg.DialTimeout = redisrate.DefaultDialTimeout
	return lossyProviderWith(t, proxy, server, keys, pols, cfg, redisrate.Options{CommandTimeout: redisrate.DefaultCommandTimeout, MaxInFlight: 4})
}

// lossyProviderWith is lossyProvider with the given client configuration
// and options.
func lossyProviderWith(t *testing.T, proxy, server string, keys *keyspace.Builder, pols []ratelimit.Policy, cfg redisrate.ClientConfig, opts redisrate.Options) (*redisrate.Provider, *atomic.Bool) {
	t.Helper()
	direct := new(atomic.Bool)
	cfg.Dialer = func(ctx context.Context, network, _ string) (net.Conn, error) {
		addr := proxy
		if direct.Load() {
			addr = server
		}
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}
	client, err := redisrate.NewClient(cfg)
	require.NoError(t, err)
	p, err := redisrate.New(client, keys, pols, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	require.NoError(t, p.Start(redistest.AdminCtx(t)))
	return p, direct
}

// TestDedupRetryAtDefaultTimeouts is issue 20's proof that the promised
// retry works at the service's shipped defaults: the command and dial
// timeouts are redisrate's defaults (APP_RATE_LIMIT_COMMAND_TIMEOUT and
// _DIAL_TIMEOUT), pipelining is on as in the service, and the deadline is
// the derived APP_WEB_EVALUATION_TIMEOUT for a dedup policy
// (redisrate.EvaluationTimeout, three command timeouts; ADR 0017). The
// server runs the call and its reply is lost: no reply at all (a downstream
// timeout toxic: Indeterminate{timeout} after one command timeout) or the
// connection dropped as the reply comes (a downstream limit_data toxic of 0
// bytes: Indeterminate{connection_lost} at once). Either way the provider
// retries once with the same evaluation ID, the request is admitted, and
// the state counts its cost exactly once. With the deadline of a policy
// without a dedup window (two command timeouts) a timed-out reply leaves
// less than one command timeout: not retried, Indeterminate{timeout},
// charged once.
func TestDedupRetryAtDefaultTimeouts(t *testing.T) {
	srv := redistest.Start(t)
	admin := srv.Client()
	proxy := startProxy(t, srv.Addr())
	keys := randomKeys(t)
	pol := dedupPolicies(t)[0]
	defaults := func() (redisrate.ClientConfig, redisrate.Options) {
		cfg := clientConfig(proxy.Listen, redisrate.DefaultCommandTimeout, 4)
		cfg.DialTimeout = redisrate.DefaultDialTimeout
		return cfg, redisrate.Options{CommandTimeout: redisrate.DefaultCommandTimeout, MaxInFlight: 4, PipelineMaxBatch: lanePipelineBatch}
	}
	faults := []struct {
		name, toxic string
		category    ratelimit.Category
	}{
		{"reply never comes", `{"type":"timeout","stream":"downstream","attributes":{"timeout":0}}`, ratelimit.CategoryTimeout},
		{"connection dropped", `{"type":"limit_data","stream":"downstream","attributes":{"bytes":0}}`, ratelimit.CategoryConnectionLost},
	}
	for i, f := range faults {
		t.Run(f.name, func(t *testing.T) {
			cfg, opts := defaults()
			p, direct := lossyProviderWith(t, proxy.Listen, srv.Addr(), keys, []ratelimit.Policy{pol}, cfg, opts)
			require.True(t, ratelimit.Admitted(ask(p, pol.ID(), randomSubject(t), 1)), "warm proxied connection")
			subject := randomSubject(t)
			resetStats(t, admin)
			remove := addToxic(t, proxy, f.toxic)
			direct.Store(true)
			id := ratelimit.EvaluationID("lost-at-defaults-" + strconv.Itoa(i))
			start := time.Now()
			out := p.Evaluate(context.Background(), ratelimit.Request{PolicyID: pol.ID(), SubjectDigest: subject, Cost: 2,
				EvaluationID: id, Deadline: start.Add(redisrate.EvaluationTimeout(redisrate.DefaultCommandTimeout, true))})
			took := time.Since(start)
			remove()
			require.True(t, ratelimit.Admitted(out), "%v (after %v)", out, took)
			waitCalls(t, admin, "evalsha", 2)
			used, ok := consumed(t, admin, keys, pol, subject)
			require.True(t, ok)
			assert.Equal(t, int64(2), used, "cost 2 charged exactly once")
			decided, failed := p.DedupRetries()
			assert.Equal(t, [2]uint64{1, 0}, [2]uint64{decided, failed})
			t.Logf("%s: admitted after %v, replayed %v", f.name, took, out.(ratelimit.Evaluated).Decision.Replayed)
		})
	}
	t.Run("reply never comes, deadline without room for a retry", func(t *testing.T) {
		cfg, opts := defaults()
		p, direct := lossyProviderWith(t, proxy.Listen, srv.Addr(), keys, []ratelimit.Policy{pol}, cfg, opts)
		require.True(t, ratelimit.Admitted(ask(p, pol.ID(), randomSubject(t), 1)), "warm proxied connection")
		subject := randomSubject(t)
		resetStats(t, admin)
		remove := addToxic(t, proxy, faults[0].toxic)
		direct.Store(true)
		out := p.Evaluate(context.Background(), ratelimit.Request{PolicyID: pol.ID(), SubjectDigest: subject, Cost: 2,
			EvaluationID: "lost-no-room", Deadline: time.Now().Add(redisrate.EvaluationTimeout(redisrate.DefaultCommandTimeout, false))})
		remove()
		assert.Equal(t, ratelimit.KindIndeterminate, out.Kind(), "%v", out)
		assert.Equal(t, ratelimit.CategoryTimeout, ratelimit.CategoryOf(out), "%v", out)
		waitCalls(t, admin, "evalsha", 1)
		used, ok := consumed(t, admin, keys, pol, subject)
		require.True(t, ok, "the lost call ran")
		assert.Equal(t, int64(2), used)
		decided, failed := p.DedupRetries()
		assert.Zero(t, decided+failed, "no room: not re-sent")
	})
}

// TestDedupRetryChargesOnce is issue 14's exactly-once proof on the fault
// lane: the server runs a dedup call, its reply is dropped on the way back
// (a downstream timeout toxic), the provider times out (Indeterminate) and
// retries once with the same evaluation ID on a new connection; the
// program answers the recorded decision, so the request is admitted and
// the server's state counts its cost exactly once. The same loss without
// an evaluation ID stays Indeterminate and is not re-sent (at most once).
func TestDedupRetryChargesOnce(t *testing.T) {
	srv := redistest.Start(t)
	admin := srv.Client()
	proxy := startProxy(t, srv.Addr())
	keys := randomKeys(t)
	for _, pol := range dedupPolicies(t) {
		t.Run(pol.Algorithm().String(), func(t *testing.T) {
			p, direct := lossyProvider(t, proxy.Listen, srv.Addr(), keys, []ratelimit.Policy{pol})
			require.True(t, ratelimit.Admitted(ask(p, pol.ID(), randomSubject(t), 1)), "warm proxied connection")
			subject := randomSubject(t)
			resetStats(t, admin)
			remove := addToxic(t, proxy, `{"type":"timeout","stream":"downstream","attributes":{"timeout":0}}`)
			direct.Store(true)
			out := p.Evaluate(context.Background(), ratelimit.Request{PolicyID: pol.ID(), SubjectDigest: subject, Cost: 2,
				EvaluationID: "lost-reply-1", Deadline: time.Now().Add(dedupDeadline)})
			remove()
			require.True(t, ratelimit.Admitted(out), "%v", out)
			// Both calls ran: the lost one and the retry. Normally the
			// retry is the replay; were the proxied call delayed past the
			// retry, the retry would record and the lost one replay. The
			// charge is once either way.
			waitCalls(t, admin, "evalsha", 2)
			if !out.(ratelimit.Evaluated).Decision.Replayed {
				t.Logf("the lost call ran after its retry (loaded machine); the retry recorded the decision")
			}
			used, ok := consumed(t, admin, keys, pol, subject)
			require.True(t, ok)
			assert.Equal(t, int64(2), used, "cost 2 charged exactly once")
			decided, failed := p.DedupRetries()
			assert.Equal(t, [2]uint64{1, 0}, [2]uint64{decided, failed})

			// The same ID again, later: the lost call and its retry used
			// the ID's one replay (whichever ran second), so this reuse
			// is charged like a new request.
			out = p.Evaluate(context.Background(), ratelimit.Request{PolicyID: pol.ID(), SubjectDigest: subject, Cost: 2,
				EvaluationID: "lost-reply-1", Deadline: time.Now().Add(dedupDeadline)})
			require.True(t, ratelimit.Admitted(out), "%v", out)
			assert.False(t, out.(ratelimit.Evaluated).Decision.Replayed)
			used, _ = consumed(t, admin, keys, pol, subject)
			assert.Equal(t, int64(4), used)
		})
		t.Run(pol.Algorithm().String()+" without an evaluation id", func(t *testing.T) {
			p, direct := lossyProvider(t, proxy.Listen, srv.Addr(), keys, []ratelimit.Policy{pol})
			require.True(t, ratelimit.Admitted(ask(p, pol.ID(), randomSubject(t), 1)), "warm proxied connection")
			subject := randomSubject(t)
			resetStats(t, admin)
			remove := addToxic(t, proxy, `{"type":"timeout","stream":"downstream","attributes":{"timeout":0}}`)
			direct.Store(true)
			out := ask(p, pol.ID(), subject, 2)
			remove()
			assert.Equal(t, ratelimit.KindIndeterminate, out.Kind(), "%v", out)
			assert.Equal(t, ratelimit.CategoryTimeout, ratelimit.CategoryOf(out), "%v", out)
			waitCalls(t, admin, "evalsha", 1)
			used, ok := consumed(t, admin, keys, pol, subject)
			require.True(t, ok, "the lost call ran")
			assert.Equal(t, int64(2), used)
			decided, failed := p.DedupRetries()
			assert.Zero(t, decided+failed, "not re-sent")
			assert.Equal(t, 1, calls(t, admin, "evalsha"), "not re-sent")
		})
	}
}

// waitCalls waits (bounded) until INFO commandstats counts n calls of cmd,
// and fails if it counts more.
func waitCalls(t *testing.T, admin *redis.Client, cmd string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := calls(t, admin, cmd)
		require.LessOrEqual(t, got, n, "%s calls", cmd)
		if got == n {
			return
		}
		require.True(t, time.Now().Before(deadline), "%s: %d calls, want %d", cmd, got, n)
		time.Sleep(10 * time.Millisecond)
	}
}
