package ratelease

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/internal/changetest"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/programs"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redisrate"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// overBucket is the history checker for a token bucket of capacity
// tokens refilled at perMs tokens per millisecond: over every interval
// [a, b] between two admissions' instants, the admissions certainly in it
// (both their instants inside) must be at most capacity + perMs * (b - a
// + slack), the bucket's own bound; it returns the intervals above it
// (at most 5). slack covers the server's clock, floored to its
// millisecond. Every admission is on the one clock of this machine.
func overBucket(all []admission, capacity int64, perMs float64, slack time.Duration) []string {
	over, _ := bucketExcess(all, capacity, perMs, slack)
	return over
}

// bucketExcess is overBucket, and the largest excess over the bound of any
// interval (negative: the closest the history came to it).
func bucketExcess(all []admission, capacity int64, perMs float64, slack time.Duration) (over []string, most float64) {
	most = -float64(capacity)
	starts := slices.Clone(all)
	slices.SortFunc(starts, func(x, y admission) int { return x.before.Compare(y.before) })
	ends := slices.Clone(all)
	slices.SortFunc(ends, func(x, y admission) int { return x.after.Compare(y.after) })
	for i, s := range starts {
		if i > 0 && starts[i-1].before.Equal(s.before) {
			continue // the same interval start
		}
		var n int64
		reported := false // one report per start
		for _, e := range ends {
			if e.before.Before(s.before) {
				continue
			}
			n++
			span := e.after.Sub(s.before) + slack
			bound := float64(capacity) + perMs*float64(span)/float64(time.Millisecond)
			most = max(most, float64(n)-bound)
			if float64(n) > bound && len(over) < 5 && (len(over) == 0 || !reported) {
				over = append(over, fmt.Sprintf("%d admissions in %v > %.1f", n, e.after.Sub(s.before), bound))
				reported = true
			}
		}
	}
	return over, most
}

// TestBucketCheckerCounts: the checker reports a burst above the capacity
// within a millisecond, and not the same burst spread at the rate.
func TestBucketCheckerCounts(t *testing.T) {
	t0 := time.Now()
	var burst, spread []admission
	for i := range 12 {
		at := t0.Add(time.Duration(i) * 10 * time.Microsecond)
		burst = append(burst, admission{0, at, at.Add(time.Microsecond)})
		at = t0.Add(time.Duration(i) * 10 * time.Millisecond)
		spread = append(spread, admission{0, at, at.Add(time.Microsecond)})
	}
	assert.NotEmpty(t, overBucket(burst, 10, 0.1, 2*time.Millisecond))
	assert.Empty(t, overBucket(spread, 10, 0.1, 2*time.Millisecond))
}

// bucketPerMs is the refill of the buckets of these tests, units per ms.
const bucketPerMs = 0.1

// bucketPolicies are the leased buckets of these tests, the algorithms
// that record leases (ADR 0042): a token bucket and a GCRA, each of 100
// units refilled at one per 10 ms (full again a second after empty),
// leases of at most 10 units for 600 ms. The slow refill keeps the
// workload's shape whatever the round trip: a lease outlives the refill
// of what its round took.
func bucketPolicies(t testing.TB) map[string]ratelimit.Policy {
	return map[string]ratelimit.Policy{
		"token bucket": leasedPolicy(t, ratelimit.TokenBucket{Capacity: 100, RefillTokens: 1, RefillPeriod: 10 * time.Millisecond}, 0.1, 600*time.Millisecond),
		"gcra":         leasedPolicy(t, ratelimit.GCRA{Rate: 1, Period: 10 * time.Millisecond, Burst: 100}, 0.1, 600*time.Millisecond),
	}
}

// unrecorded is the broken build: a port that sends a lease's
// reservation as an ordinary decision of its cost and its give-back as an
// ordinary refund (the aligned windows' way), so the bucket refills into
// leased units. It decides on the same state key through a provider of
// the same policy without the lease (MaxCost its capacity).
type unrecorded struct {
	ratelimit.EdgePort
	plain ratelimit.EdgePort
}

func (u unrecorded) Evaluate(ctx context.Context, req ratelimit.Request) ratelimit.Outcome {
	if req.Lease {
		req.Lease = false
		return u.plain.Evaluate(ctx, req)
	}
	return u.EdgePort.Evaluate(ctx, req)
}

func (u unrecorded) Refund(ctx context.Context, req ratelimit.Request, r ratelimit.Receipt) ratelimit.Outcome {
	if req.Lease {
		req.Lease = false
		return u.plain.Refund(ctx, req, r)
	}
	return u.EdgePort.Refund(ctx, req, r)
}

// shape is the timing of one round of leaseRounds, each after the end of
// the round's first phase (the leases built).
type shape struct {
	// settle is the pause before each round.
	settle time.Duration
	// spendAfter, when spend > 0, is when every instance sends spend
	// requests, one after another (answered from its lease while it
	// lives).
	spendAfter time.Duration
	spend      int
	// burstAfter is when every instance hammers the subject, 4 workers
	// each, until a worker is denied three times in a row (the budget
	// spent: how fast the round trips are does not change what the round
	// admits), at most 2,000 requests or a second.
	burstAfter time.Duration
}

// bucketShape shows a bucket refilling into leased units: 500 ms after
// the leases are built, the bucket refilled and the leases still live,
// every instance hammers the subject until it is spent.
var bucketShape = shape{settle: 1100 * time.Millisecond, burstAfter: 500 * time.Millisecond}

// leaseRounds runs four rounds of a workload on three leasing instances
// and returns their admissions: each instance sends requests until it
// holds a lease with at least 4 units unspent (at most 30; its leases
// grow with its demand, 2, 4, 8 units), then the round goes as sh says.
// With faults, round 1 kills instance 0 holding its lease (replaced for
// the next round), round 2 cuts instance 2 off from Redis, round 3
// restarts Redis (append-only file written at every command). broken
// builds every instance on unrecorded.
func leaseRounds(t *testing.T, p ratelimit.Policy, sh shape, broken, faults bool) []admission {
	t.Helper()
	srv := redistest.Start(t, redistest.WithConfig("appendonly", "yes"), redistest.WithConfig("appendfsync", "always"))
	keys := redistest.RandomKeys(t)
	pols := []ratelimit.Policy{p}
	proxy := redistest.StartProxy(t, srv.Addr())
	mk := func(inst int) *Leaser {
		var inner *redisrate.Provider
		if inst == 2 {
			inner = changetest.Provider(t, changetest.ClientAt(t, proxy.Addr()), keys, pols...)
		} else {
			inner = provider(t, srv, keys, pols)
		}
		if !broken {
			return newLeaser(t, inner, pols)
		}
		plainPol, err := ratelimit.NewPolicy(ratelimit.PolicySpec{ID: p.ID(), Revision: p.Revision(), Algorithm: p.Algorithm(), Params: p.Params(),
			MaxCost: p.Limit(), CleanupGrace: time.Minute, MaxClockRegression: 2 * time.Second, FailurePolicy: ratelimit.FailClosed})
		require.NoError(t, err)
		plain := changetest.Provider(t, changetest.ClientAt(t, srv.Addr()), keys, plainPol)
		return newLeaser(t, unrecorded{EdgePort: inner, plain: plain}, pols)
	}
	leasers := []*Leaser{mk(0), mk(1), mk(2)}
	s := changetest.RandomSubject(t)
	var h history
	call := func(inst int, l *Leaser) bool {
		before := time.Now()
		if admitted(l.Evaluate(context.Background(), request(p, s))) {
			h.record(admission{inst, before, time.Now()})
			return true
		}
		return false
	}
	// each runs f once per instance at once, workers goroutines each.
	each := func(workers int, f func(inst int, l *Leaser)) {
		var wg sync.WaitGroup
		for inst, l := range leasers {
			for range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					f(inst, l)
				}()
			}
		}
		wg.Wait()
	}
	for round := range 4 {
		time.Sleep(sh.settle)
		each(1, func(inst int, l *Leaser) {
			// Until it holds a lease with units left (a reservation in the
			// millisecond of its last one is refused: a pause).
			for i := 0; i < 30 && (i < 4 || l.unspent() < 4); i++ {
				call(inst, l)
				time.Sleep(300 * time.Microsecond)
			}
		})
		built := time.Now()
		held := leasers[0].unspent() + leasers[1].unspent() + leasers[2].unspent()
		cut := false
		if faults {
			switch round {
			case 1:
				leasers[0].kill() // holding its lease's unspent units
			case 2:
				proxy.Refuse()
				cut = true
			case 3:
				srv.Restart()
			}
		}
		if sh.spend > 0 {
			time.Sleep(time.Until(built.Add(sh.spendAfter)))
			each(1, func(inst int, l *Leaser) {
				for range sh.spend {
					call(inst, l)
				}
			})
		}
		time.Sleep(time.Until(built.Add(sh.burstAfter)))
		end := time.Now().Add(time.Second)
		each(4, func(inst int, l *Leaser) {
			for i, denied := 0, 0; i < 2000 && denied < 3 && time.Now().Before(end); i++ {
				if call(inst, l) {
					denied = 0
				} else {
					denied++
				}
			}
		})
		if cut {
			require.NoError(t, proxy.Accept())
		}
		t.Logf("round %d: %d units unspent in leases after they were built", round, held)
		for i, l := range leasers {
			if l.isClosed() {
				leasers[i] = mk(i)
			}
		}
	}
	return h.all
}

// TestBucketHistoryKeepsTheBound (issue 37 item 4): three instances lease
// a token bucket through an instance killed holding a lease, a partition
// and a Redis restart; the checker finds no interval with more admissions
// than the bucket's bound.
func TestBucketHistoryKeepsTheBound(t *testing.T) {
	for name, p := range bucketPolicies(t) {
		t.Run(name, func(t *testing.T) {
			all := leaseRounds(t, p, bucketShape, false, true)
			over, most := bucketExcess(all, 100, bucketPerMs, 2*time.Millisecond)
			assert.Empty(t, over)
			t.Logf("%d admissions checked; the closest interval came %.1f to the bound", len(all), most)
		})
	}
}

// TestBucketHistoryCheckerFailsABrokenLease: the same workload on the
// broken build, a lease counted as consumed at once and then refilled
// into: the checker must find an interval over the bound.
func TestBucketHistoryCheckerFailsABrokenLease(t *testing.T) {
	for name, p := range bucketPolicies(t) {
		t.Run(name, func(t *testing.T) {
			all := leaseRounds(t, p, bucketShape, true, false)
			over, most := bucketExcess(all, 100, bucketPerMs, 2*time.Millisecond)
			assert.NotEmpty(t, over, "the checker did not see the broken build's excess")
			t.Logf("broken build, %d admissions, at most %.1f over the bound: %v", len(all), most, over)
		})
	}
}

// TestBucketKilledInstanceReclaimedByExpiry: an instance killed holding a
// lease leaves its record in the state until the lease's end; from then
// the bucket refills past those units (at the rate, from where the level
// stood at the end), and the record is gone with the next write.
func TestBucketKilledInstanceReclaimedByExpiry(t *testing.T) {
	for name, p := range bucketPolicies(t) {
		t.Run(name, func(t *testing.T) { killedInstanceReclaimedByExpiry(t, p) })
	}
}

func killedInstanceReclaimedByExpiry(t *testing.T, p ratelimit.Policy) {
	srv := redistest.Start(t)
	keys := redistest.RandomKeys(t)
	pols := []ratelimit.Policy{p}
	l := newLeaser(t, provider(t, srv, keys, pols), pols)
	s := changetest.RandomSubject(t)
	for i := 0; i < 30 && (i < 4 || l.unspent() < 4); i++ {
		require.True(t, admitted(l.Evaluate(context.Background(), request(p, s))))
		time.Sleep(300 * time.Microsecond)
	}
	lost := l.unspent()
	require.Positive(t, lost)
	killed := time.Now()
	l.kill()
	key, err := redisrate.StateKey(keys, p, s)
	require.NoError(t, err)
	raw, err := srv.Client().Get(t.Context(), key).Result()
	require.NoError(t, err)
	recs, err := programs.State(raw).LeaseRecords()
	require.NoError(t, err)
	require.Len(t, recs, 1, "the killed instance's lease is recorded")
	lp, _ := p.Lease()
	assert.LessOrEqual(t, recs[0].EndMillis, killed.Add(lp.TTL+time.Millisecond).UnixMilli(), "it ends by its TTL")
	assert.LessOrEqual(t, lost, lp.MaxUnits(p.Limit()), "a killed instance loses at most one lease (the documented bound)")
	assert.LessOrEqual(t, lost, recs[0].Units, "and no more than its record holds")

	// A fresh instance after the end plus the fill time: a full bucket.
	time.Sleep(time.Until(time.UnixMilli(recs[0].EndMillis).Add(time.Duration(p.WindowMillis()+100) * time.Millisecond)))
	fresh := provider(t, srv, keys, pols)
	out := fresh.Evaluate(context.Background(), request(p, s))
	require.True(t, admitted(out))
	ev := out.(ratelimit.Evaluated)
	assert.Equal(t, p.Limit()-1, ev.Decision.Remaining, "the lost units came back by the lease's end and the refill")
	raw, err = srv.Client().Get(t.Context(), key).Result()
	require.NoError(t, err)
	recs, err = programs.State(raw).LeaseRecords()
	require.NoError(t, err)
	assert.Empty(t, recs, "the ended record is dropped by the write")
	t.Logf("killed holding %d unspent units, reclaimed at the lease's end", lost)
}
