package reliability_test

import (
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redisinfo"

	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	_ "github.com/Shopify/toxiproxy/v2/toxics" // registers the toxic types
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/programs"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redisrate"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
	"github.com/tech-log/tech-log-backend/shared-contract/keyspace"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit/ratelimittest"
)

// faultTimeout is the command timeout of the fault lane: short enough to
// keep the lane quick, long enough for two noisy cores under -race.
const faultTimeout = 300 * time.Millisecond

// startProxy starts an in-process toxiproxy proxy on a free loopback port
// in front of upstream and stops it with t.Cleanup.
func startProxy(t testing.TB, upstream string) *toxiproxy.Proxy {
	t.Helper()
	server := newToxiServer()
	p := toxiproxy.NewProxy(server, "redis", "127.0.0.1:0", upstream)
	require.NoError(t, p.Start())
	t.Cleanup(p.Stop)
	require.True(t, strings.HasPrefix(p.Listen, "127.0.0.1:"), p.Listen)
	return p
}

// newToxiServer returns an in-process toxiproxy server whose logger
// discards everything.
func newToxiServer() *toxiproxy.ApiServer {
	return toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
}

// addToxic adds one toxic given as toxiproxy's JSON and returns a func
// that removes it.
func addToxic(t testing.TB, p *toxiproxy.Proxy, json string) func() {
	t.Helper()
	w, err := p.Toxics.AddToxicJson(strings.NewReader(json))
	require.NoError(t, err, json)
	removed := false
	remove := func() {
		if !removed {
			removed = true
			require.NoError(t, removeToxic(p, w.Name))
		}
	}
	t.Cleanup(func() {
		if !removed {
			removed = true
			_ = removeToxic(p, w.Name)
		}
	})
	return remove
}

// rerollToxic has toxic name (given as json, the toxic addToxic added)
// drawn again on every link of p every interval, by removing and adding it
// again, until the returned stop is called (also at cleanup). toxiproxy
// draws once per link, when the link or the toxic starts; a lane on
// pipelined providers has few links (4 providers x 4 connection turns), so
// a toxicity of 0.3 drawn once leaves every link clean in 0.7^16 = 0.3% of
// runs and the run feels no fault at all (seen once in CI). Drawn again
// every interval, a one-second run draws at least ten times per link.
// (UpdateToxicJson would draw again too, but it writes the toxicity that
// running links read without a lock: a data race inside toxiproxy.) stop
// waits until the roller has ended and leaves the toxic in place.
func rerollToxic(t testing.TB, p *toxiproxy.Proxy, name, json string, every time.Duration) (stop func()) {
	t.Helper()
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				if removeToxic(p, name) != nil {
					return // the cleanup's removal reports nothing more
				}
				if _, err := p.Toxics.AddToxicJson(strings.NewReader(json)); err != nil {
					return
				}
			}
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { close(done); <-finished }) }
	t.Cleanup(stop)
	return stop
}

// toxicRemovalBound bounds one RemoveToxic: a toxic blocked on a dead link
// (see slicerToxic) would otherwise hang it, and the test, for good.
const toxicRemovalBound = 10 * time.Second

// removeToxic removes the toxic name from p, failing after
// toxicRemovalBound instead of hanging.
func removeToxic(p *toxiproxy.Proxy, name string) error {
	done := make(chan error, 1)
	go func() { done <- p.Toxics.RemoveToxic(context.Background(), name) }()
	select {
	case err := <-done:
		return err
	case <-time.After(toxicRemovalBound):
		return fmt.Errorf("toxiproxy: removing toxic %q still blocked after %v (a toxic stuck sending to a closed link)", name, toxicRemovalBound)
	}
}

func clientConfig(addr string, timeout time.Duration, pool int) redisrate.ClientConfig {
	return redisrate.ClientConfig{
		Addr:           addr,
		Protocol:       redisrate.ProtocolRESP2,
		CommandTimeout: timeout,
		DialTimeout:    timeout,
		PoolSize:       pool,
		PoolTimeout:    timeout / 2,
	}
}

// lanePipelineBatch is the PipelineMaxBatch of newProvider: the service's
// default (APP_RATE_LIMIT_PIPELINE_MAX_BATCH), so the lane runs with
// pipelined calls on, as the service does.
const lanePipelineBatch = 16

// newProvider builds and starts a Provider for policies on addr, with
// pipelined calls on (lanePipelineBatch); Start leaves one warm connection
// in the pool.
func newProvider(t testing.TB, cfg redisrate.ClientConfig, keys *keyspace.Builder, policies ...ratelimit.Policy) *redisrate.Provider {
	t.Helper()
	client, err := redisrate.NewClient(cfg)
	require.NoError(t, err)
	p, err := redisrate.New(client, keys, policies, redisrate.Options{CommandTimeout: cfg.CommandTimeout, MaxInFlight: cfg.PoolSize, PipelineMaxBatch: lanePipelineBatch})
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, p.Start(ctx))
	return p
}

// randomKeys is the test's own corner of the keyspace (redistest).
func randomKeys(t testing.TB) *keyspace.Builder { return redistest.RandomKeys(t) }

func randomSubject(t testing.TB) ratelimit.SubjectDigest { return ratelimittest.Subject(t) }

func mustPolicy(t testing.TB, id ratelimit.PolicyID, params ratelimit.Params, maxCost int64) ratelimit.Policy {
	t.Helper()
	return mustPolicyGrace(t, id, params, maxCost, time.Minute)
}

func mustPolicyGrace(t testing.TB, id ratelimit.PolicyID, params ratelimit.Params, maxCost int64, grace time.Duration) ratelimit.Policy {
	t.Helper()
	p, err := ratelimit.NewPolicy(ratelimit.PolicySpec{
		ID: id, Revision: 1, Algorithm: params.Algorithm(), Params: params, MaxCost: maxCost,
		CleanupGrace: grace, MaxClockRegression: 2 * time.Second, FailurePolicy: ratelimit.FailClosed,
	})
	require.NoError(t, err)
	// Exact counts in one long window: a test must not run across its end.
	if w := p.WindowMillis(); w >= time.Minute.Milliseconds() && p.Algorithm() != ratelimit.AlgorithmTokenBucket {
		ratelimittest.ClearOfWindowEnd(t, time.Duration(w)*time.Millisecond, time.Minute)
	}
	return p
}

// hourPolicies are one policy of each algorithm whose state does not move
// during a test (limit 5 per hour).
func hourPolicies(t testing.TB) []ratelimit.Policy {
	return []ratelimit.Policy{
		mustPolicy(t, "r-fixed", ratelimit.FixedWindow{Limit: 5, Window: time.Hour}, 5),
		mustPolicy(t, "r-sliding", ratelimit.SlidingWindowCounter{Limit: 5, Window: time.Hour}, 5),
		mustPolicy(t, "r-bucket", ratelimit.TokenBucket{Capacity: 5, RefillTokens: 1, RefillPeriod: time.Hour}, 5),
	}
}

func ask(p ratelimit.EdgePort, id ratelimit.PolicyID, subject ratelimit.SubjectDigest, cost int64) ratelimit.Outcome {
	return p.Evaluate(context.Background(), ratelimit.Request{PolicyID: id, SubjectDigest: subject, Cost: cost, Deadline: time.Now().Add(30 * time.Second)})
}

// calls returns the calls of cmd in INFO commandstats (0 when absent),
// read by redistest with redisinfo (the one INFO reader).
func calls(t testing.TB, admin *redis.Client, cmd string) int {
	t.Helper()
	return int(redistest.CommandStats(t, admin)[cmd].Calls)
}

// infoField reads one field of an INFO section as text ("" when absent).
func infoField(t testing.TB, c *redis.Client, section, field string) string {
	t.Helper()
	info, err := c.Info(redistest.AdminCtx(t), section).Result()
	require.NoError(t, err)
	v, _ := redisinfo.Field(info, field)
	return v
}

// infoInt reads one integer field of an INFO section.
func infoInt(t testing.TB, admin *redis.Client, section, field string) int64 {
	t.Helper()
	v := infoField(t, admin, section, field)
	require.NotEmpty(t, v, "INFO %s has no %s", section, field)
	n, err := strconv.ParseInt(v, 10, 64)
	require.NoError(t, err, "%s:%s", field, v)
	return n
}

func resetStats(t testing.TB, admin *redis.Client) {
	t.Helper()
	require.NoError(t, admin.ConfigResetStat(redistest.AdminCtx(t)).Err())
}

// consumed returns the units the stored state says were consumed (count
// for the windows, capacity minus tokens for the bucket), and whether the
// state key exists.
func consumed(t testing.TB, admin *redis.Client, keys *keyspace.Builder, p ratelimit.Policy, subject ratelimit.SubjectDigest) (int64, bool) {
	t.Helper()
	key, err := redisrate.StateKey(keys, p, subject)
	require.NoError(t, err)
	field := programs.FieldCount
	if p.Algorithm() == ratelimit.AlgorithmTokenBucket {
		field = programs.FieldTokens
	}
	raw, err := admin.Get(redistest.AdminCtx(t), key).Bytes()
	if err == redis.Nil {
		return 0, false
	}
	require.NoError(t, err)
	f, err := programs.State(raw).Decode()
	require.NoError(t, err)
	v := f[field]
	if p.Algorithm() == ratelimit.AlgorithmTokenBucket {
		return p.Limit() - v, true
	}
	return v, true
}

func ownServer(t testing.TB, srv *redistest.Server) {
	t.Helper()
	if srv.Lane() == redistest.LaneExternal {
		t.Skip("reconfigures or faults the server: not on the external lane")
	}
}

// waitFor polls cond until it returns nil, for at most d, and then fails t
// with cond's last error. It polls every d/1000, kept within 2..50 ms.
func waitFor(t *testing.T, what string, d time.Duration, cond func() error) {
	t.Helper()
	poll := min(max(d/1000, 2*time.Millisecond), 50*time.Millisecond)
	deadline := time.Now().Add(d)
	err := cond()
	for ; err != nil && time.Now().Before(deadline); err = cond() {
		time.Sleep(poll)
	}
	if err != nil {
		t.Fatalf("%s: not within %v: %v", what, d, err)
	}
}

// expect is nil when got equals want, else an error naming what.
func expect[T comparable](what string, got, want T) error {
	if got != want {
		return fmt.Errorf("%s: %v, want %v", what, got, want)
	}
	return nil
}
