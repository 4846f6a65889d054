package reliability_test

// The load lane: bounded in count and time, loopback only. No timing
// assertions: the figures are logged (and reported in docs/reliability.md).

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/programs"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redisrate"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

const (
	loadProviders  = 4
	loadGoroutines = 64
	loadPerG       = 300 // request bound per goroutine
	// loadBudget bounds the 100k-subject run in time as well as count.
	loadBudget = 2 * time.Minute
)

// tally is what one load run observed.
type tally struct {
	mu         sync.Mutex
	issued     int
	kinds      map[ratelimit.OutcomeKind]int
	allowedAt  map[int64]int64 // ResetAt (ms) -> units admitted
	deniedAt   map[int64]int64 // ResetAt (ms) -> requests denied
	allowedSum int64
}

func newTally() *tally {
	return &tally{kinds: map[ratelimit.OutcomeKind]int{}, allowedAt: map[int64]int64{}, deniedAt: map[int64]int64{}}
}

func (ta *tally) add(out ratelimit.Outcome) {
	ta.mu.Lock()
	defer ta.mu.Unlock()
	ta.issued++
	ta.kinds[out.Kind()]++
	if e, ok := out.(ratelimit.Evaluated); ok {
		at := e.Decision.ResetAt.UnixMilli()
		if e.Decision.Allowed {
			ta.allowedAt[at]++
			ta.allowedSum++
		} else {
			ta.deniedAt[at]++
		}
	} else if ratelimit.Admitted(out) {
		panic("a failure outcome admitted")
	}
}

// hammer runs loadGoroutines goroutines per provider, cost 1 each, on one
// subject until d has passed and at least minIssued requests were issued
// (so that a loaded machine, which issues fewer per second, still reaches
// the contention a test needs), each goroutine at most loadPerG requests
// and none past loadBudget.
func hammer(providers []*redisrate.Provider, id ratelimit.PolicyID, subject ratelimit.SubjectDigest, d time.Duration, minIssued int) *tally {
	ta := newTally()
	start := time.Now()
	stop := start.Add(d)
	var issued atomic.Int64
	done := func() bool {
		return time.Since(start) >= loadBudget || !time.Now().Before(stop) && issued.Load() >= int64(minIssued)
	}
	redistest.Load(len(providers)*loadGoroutines, loadPerG, 0, done, func(w, _ int) {
		issued.Add(1)
		ta.add(ask(providers[w%len(providers)], id, subject, 1))
	})
	return ta
}

// contended is the request count that reaches pol's limit several times
// over in a one-second run, however slowly the machine issues them.
func contended(pol ratelimit.Policy) int { return int(8 * pol.Limit()) }

func loadPolicies(t testing.TB) []ratelimit.Policy {
	return []ratelimit.Policy{
		mustPolicy(t, "l-fixed", ratelimit.FixedWindow{Limit: 20, Window: 250 * time.Millisecond}, 1),
		mustPolicy(t, "l-sliding", ratelimit.SlidingWindowCounter{Limit: 20, Window: 250 * time.Millisecond}, 1),
		mustPolicy(t, "l-bucket", ratelimit.TokenBucket{Capacity: 20, RefillTokens: 1, RefillPeriod: 10 * time.Millisecond}, 1),
	}
}

// checkLimits asserts the per-algorithm admission bounds; exact says no
// faults were injected (every request was evaluated).
func checkLimits(t *testing.T, pol ratelimit.Policy, ta *tally, elapsed time.Duration, exact bool) {
	t.Helper()
	limit := pol.Limit()
	switch pol.Algorithm() {
	case ratelimit.AlgorithmFixedWindow:
		for at, n := range ta.allowedAt {
			assert.LessOrEqual(t, n, limit, "window ending %d", at)
			if exact && ta.deniedAt[at] > 0 {
				// cost 1: a denial means the count had reached the limit.
				assert.Equal(t, limit, n, "window ending %d: min(limit, requests) = limit", at)
			}
		}
		if exact {
			for at := range ta.deniedAt {
				assert.Equal(t, limit, ta.allowedAt[at], "window ending %d denied before the limit", at)
			}
		}
		assert.GreaterOrEqual(t, len(ta.allowedAt), 3, "several windows")
	case ratelimit.AlgorithmSlidingWindowCounter:
		// Allowed requests of window w all carry ResetAt = end of w+1; the
		// counter never lets the current window exceed the limit.
		for at, n := range ta.allowedAt {
			assert.LessOrEqual(t, n, limit, "window group %d", at)
		}
		assert.GreaterOrEqual(t, len(ta.allowedAt), 3, "several windows")
	case ratelimit.AlgorithmTokenBucket:
		tb := pol.Params().(ratelimit.TokenBucket)
		refills := int64(elapsed/tb.RefillPeriod) + 1
		bound := tb.Capacity + refills*tb.RefillTokens
		assert.LessOrEqual(t, ta.allowedSum, bound, "capacity + refill over %v", elapsed)
	}
	if exact {
		assert.Equal(t, ta.issued, ta.kinds[ratelimit.KindEvaluated], "no faults: every request evaluated (%v)", ta.kinds)
		assert.Positive(t, ta.kinds[ratelimit.KindEvaluated]-int(ta.allowedSum), "contention reached the limit")
	}
}

// cleanTimeout is the command and dial timeout of the lanes without faults,
// whose checks are exact (every request evaluated, one call per request):
// long enough that a loaded machine decides every call, so a failure there
// is a defect, never noise.
const cleanTimeout = 10 * time.Second

// TestLoadOverAdmission: 4 providers (separate clients) x 64 goroutines on
// one hot subject for several windows of each algorithm. Clean: every
// request evaluated, allowed per window <= limit and, for the fixed window,
// exactly min(limit, requests in the window). With random connection resets
// through toxiproxy: still <= limit, and every outcome is accounted for: the
// server ran between (evaluated) and (evaluated + indeterminate) calls.
func TestLoadOverAdmission(t *testing.T) {
	srv := redistest.Start(t)
	admin := srv.Client()
	keys := randomKeys(t)
	pols := loadPolicies(t)
	proxy := startProxy(t, srv.Addr())
	direct := make([]*redisrate.Provider, loadProviders)
	proxied := make([]*redisrate.Provider, loadProviders)
	for i := range loadProviders {
		direct[i] = newProvider(t, clientConfig(srv.Addr(), cleanTimeout, loadGoroutines), keys, pols...)
		proxied[i] = newProvider(t, clientConfig(proxy.Listen, 2*time.Second, loadGoroutines), keys, pols...)
	}
	for _, pol := range pols {
		t.Run("clean/"+pol.Algorithm().String(), func(t *testing.T) {
			resetStats(t, admin)
			start := time.Now()
			ta := hammer(direct, pol.ID(), randomSubject(t), time.Second, contended(pol))
			elapsed := time.Since(start)
			checkLimits(t, pol, ta, elapsed, true)
			assert.Equal(t, ta.issued, calls(t, admin, "evalsha"), "one call per request")
			t.Logf("%s clean: %d requests in %v, %d allowed, %d windows, kinds %v", pol.ID(), ta.issued, elapsed.Round(time.Millisecond), ta.allowedSum, len(ta.allowedAt), ta.kinds)
		})
	}
	for _, pol := range pols {
		t.Run("resets/"+pol.Algorithm().String(), func(t *testing.T) {
			// 30% of connections get an RST 20 ms after their first reply
			// byte; go-redis redials, each new link rolls again.
			// The draw is repeated every 100 ms (rerollToxic): the few
			// pipelined links would otherwise all draw clean now and then.
			const rst = `{"name":"rst","type":"reset_peer","stream":"downstream","toxicity":0.3,"attributes":{"timeout":20}}`
			addToxic(t, proxy, rst)
			resetStats(t, admin)
			stopReroll := rerollToxic(t, proxy, "rst", rst, 100*time.Millisecond)
			start := time.Now()
			ta := hammer(proxied, pol.ID(), randomSubject(t), time.Second, contended(pol))
			elapsed := time.Since(start)
			stopReroll()
			checkLimits(t, pol, ta, elapsed, false)
			ran := calls(t, admin, "evalsha") + calls(t, admin, "eval")
			ev, ind := ta.kinds[ratelimit.KindEvaluated], ta.kinds[ratelimit.KindIndeterminate]
			sum := 0
			for _, n := range ta.kinds {
				sum += n
			}
			assert.Equal(t, ta.issued, sum, "every request has one outcome")
			assert.GreaterOrEqual(t, ran, ev, "every evaluated request ran")
			assert.LessOrEqual(t, ran, ev+ind, "nothing ran beyond evaluated + indeterminate (no re-sends)")
			assert.Positive(t, ind+ta.kinds[ratelimit.KindUnavailable], "resets were injected and felt")
			assert.Zero(t, ta.kinds[ratelimit.KindIncompatible])
			t.Logf("%s resets: %d requests in %v, %d allowed, kinds %v, server ran %d (indeterminate that ran: %d)",
				pol.ID(), ta.issued, elapsed.Round(time.Millisecond), ta.allowedSum, ta.kinds, ran, ran-ev)
		})
	}
}

// TestLoadOverAdmissionMatchesModel: with no faults, 4 providers x 64
// goroutines on one hot subject admit exactly what the Go model admits for
// the same number of cost-1 requests, for each algorithm. The policies'
// windows and refill are an hour long, so the run's time does not change
// the model's answer (one window, no whole token refilled): the model is
// run at one instant. A run that straddles a window boundary (ResetAt
// differs between decisions) is repeated with a fresh subject.
func TestLoadOverAdmissionMatchesModel(t *testing.T) {
	srv := redistest.Start(t)
	admin := srv.Client()
	keys := randomKeys(t)
	const limit = 300
	pols := []ratelimit.Policy{
		mustPolicy(t, "x-fixed", ratelimit.FixedWindow{Limit: limit, Window: time.Hour}, 1),
		mustPolicy(t, "x-sliding", ratelimit.SlidingWindowCounter{Limit: limit, Window: time.Hour}, 1),
		mustPolicy(t, "x-bucket", ratelimit.TokenBucket{Capacity: limit, RefillTokens: 1, RefillPeriod: time.Hour}, 1),
	}
	providers := make([]*redisrate.Provider, loadProviders)
	for i := range loadProviders {
		providers[i] = newProvider(t, clientConfig(srv.Addr(), cleanTimeout, loadGoroutines), keys, pols...)
	}
	for _, pol := range pols {
		t.Run(pol.Algorithm().String(), func(t *testing.T) {
			for attempt := 0; ; attempt++ {
				require.Less(t, attempt, 3, "three runs straddled a window boundary")
				resetStats(t, admin)
				ta := hammer(providers, pol.ID(), randomSubject(t), 0, 2*limit)
				require.Equal(t, ta.issued, ta.kinds[ratelimit.KindEvaluated], "no faults: every request evaluated (%v)", ta.kinds)
				require.Equal(t, ta.issued, calls(t, admin, "evalsha"), "one call per request")
				if pol.Algorithm() != ratelimit.AlgorithmTokenBucket && len(ta.allowedAt) > 1 {
					t.Logf("attempt %d straddled a window boundary: %v", attempt, ta.allowedAt)
					continue
				}
				require.Greater(t, ta.issued, limit, "contention beyond the limit")
				want := modelAdmits(pol, ta.issued)
				assert.Equal(t, want, ta.allowedSum, "admitted = the model's count for %d requests", ta.issued)
				t.Logf("%s: %d requests, %d admitted, model %d", pol.ID(), ta.issued, ta.allowedSum, want)
				return
			}
		})
	}
}

// modelAdmits is how many of n cost-1 requests the Go reference model
// admits from an empty key at one instant.
func modelAdmits(p ratelimit.Policy, n int) int64 {
	const now = int64(1_800_000_000_000) + 1_800_000 // mid-hour
	var st programs.State
	var admitted int64
	for range n {
		r, next := programs.Evaluate(p, st, now, 1)
		if r.Status == programs.StatusAllowed {
			admitted++
		}
		st = next
	}
	return admitted
}

// TestLoadDistinctSubjectsExpire: 100,000 distinct subjects with a short
// window: every key has a TTL, every key is accounted for (present +
// expired = 100,000), and after expiry DBSIZE is 0 and used_memory is back
// near its baseline.
func TestLoadDistinctSubjectsExpire(t *testing.T) {
	srv := redistest.Start(t)
	ownServer(t, srv)
	admin := srv.Client()
	const subjects = 100_000
	// The grace keeps every TTL at 100ms or more: a PEXPIRE whose instant has
	// already passed when Redis applies it (a script stalled on a loaded
	// machine) deletes the key without counting it in expired_keys.
	const grace = 100 * time.Millisecond
	pol := mustPolicyGrace(t, "l-many", ratelimit.FixedWindow{Limit: 3, Window: 2 * time.Second}, 1, grace)
	keys := randomKeys(t)
	providers := make([]*redisrate.Provider, loadProviders)
	for i := range loadProviders {
		providers[i] = newProvider(t, clientConfig(srv.Addr(), 2*time.Second, loadGoroutines), keys, pol)
	}
	require.NoError(t, admin.FlushAll(redistest.AdminCtx(t)).Err())
	resetStats(t, admin)
	baseline := infoInt(t, admin, "memory", "used_memory")

	start := time.Now()
	var mu sync.Mutex
	kinds := map[ratelimit.OutcomeKind]int{}
	// Worker w (provider w/loadGoroutines) takes per subjects, one more
	// for the first extra workers; past loadBudget the rest are counted as
	// missing below.
	workers := loadProviders * loadGoroutines
	per, extra := subjects/workers, subjects%workers
	count := func(w int) int { return per + min(max(extra-w, 0), 1) }
	n := 0
	for w := range workers {
		n += count(w)
	}
	redistest.Load(workers, per+1, 0, func() bool { return time.Since(start) > loadBudget }, func(w, i int) {
		if i >= count(w) {
			return
		}
		s := ratelimit.SubjectDigest(fmt.Sprintf("subject-%08d-%06d", w, i))
		out := providers[w/loadGoroutines].Evaluate(context.Background(), ratelimit.Request{PolicyID: pol.ID(), SubjectDigest: s, Cost: 1, Deadline: time.Now().Add(30 * time.Second)})
		mu.Lock()
		kinds[out.Kind()]++
		mu.Unlock()
	})
	elapsed := time.Since(start)
	require.Equal(t, subjects, n)
	require.Equal(t, subjects, kinds[ratelimit.KindEvaluated], "%v", kinds)
	peak := infoInt(t, admin, "memory", "used_memory")

	// Every key still present has a TTL; present + expired = all subjects.
	present := 0
	var cursor uint64
	for range 10_000 {
		ks, next, err := admin.Scan(redistest.AdminCtx(t), cursor, "*", 5000).Result()
		require.NoError(t, err)
		pipe := admin.Pipeline()
		ttls := make([]interface{ Val() time.Duration }, len(ks))
		for i, k := range ks {
			ttls[i] = pipe.PTTL(redistest.AdminCtx(t), k)
		}
		_, err = pipe.Exec(redistest.AdminCtx(t))
		require.NoError(t, err)
		for i, k := range ks {
			// -2 (gone meanwhile) is fine; -1 (no TTL) is not.
			assert.NotEqual(t, time.Duration(-1), ttls[i].Val(), "key %s has no TTL", k)
			if ttls[i].Val() > 0 {
				present++
				assert.LessOrEqual(t, ttls[i].Val(), 2*time.Second+grace+50*time.Millisecond)
			}
		}
		cursor = next
		if cursor == 0 {
			break
		}
	}
	require.Eventually(t, func() bool {
		return admin.DBSize(redistest.AdminCtx(t)).Val() == 0
	}, 15*time.Second, 100*time.Millisecond, "every key expires")
	assert.Equal(t, int64(subjects), infoInt(t, admin, "stats", "expired_keys"), "each subject's key existed once and expired")
	// The 256 load connections hold client buffers (not data): close them,
	// and let serverCron shrink the main dicts after the mass expiry.
	for _, p := range providers {
		require.NoError(t, p.Close())
	}
	var after int64
	assert.Eventually(t, func() bool {
		after = infoInt(t, admin, "memory", "used_memory")
		return after <= baseline+512<<10
	}, 5*time.Second, 100*time.Millisecond, "used_memory back near the baseline")

	t.Logf("100k subjects: %v to evaluate, present at scan %d, used_memory baseline %d, peak %d, after expiry %d, total %v",
		elapsed.Round(time.Millisecond), present, baseline, peak, after, time.Since(start).Round(time.Millisecond))
}
