package ratelease

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/internal/changetest"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// overSliding is the history checker for a sliding log of limit per
// window: every span [a, a + window - slack) that starts at an
// admission's first instant must certainly hold (both instants inside)
// at most limit admissions; it returns the spans above it (at most 5)
// and the most any span held. slack covers the server's clock, floored
// to its millisecond (two admissions count in one window of the log
// when their milliseconds are less than a window apart).
func overSliding(all []admission, window, slack time.Duration, limit int) (over []string, most int) {
	starts := slices.Clone(all)
	slices.SortFunc(starts, func(x, y admission) int { return x.before.Compare(y.before) })
	for i, s := range starts {
		end := s.before.Add(window - slack)
		n := 0
		for _, e := range starts[i:] {
			if !e.before.Before(end) {
				break
			}
			if e.after.Before(end) {
				n++
			}
		}
		most = max(most, n)
		if n > limit && len(over) < 5 {
			over = append(over, fmt.Sprintf("%d admissions in [%v, +%v)", n, s.before.Format("15:04:05.000000"), window-slack))
		}
	}
	return over, most
}

// TestSlidingCheckerCounts: the checker reports eleven admissions within
// a window of ten and not the same spread over two windows.
func TestSlidingCheckerCounts(t *testing.T) {
	t0 := time.Now()
	var close, spread []admission
	for i := range 11 {
		at := t0.Add(time.Duration(i) * time.Millisecond)
		close = append(close, admission{0, at, at.Add(time.Microsecond)})
		at = t0.Add(time.Duration(i) * 30 * time.Millisecond)
		spread = append(spread, admission{0, at, at.Add(time.Microsecond)})
	}
	over, _ := overSliding(close, 200*time.Millisecond, 2*time.Millisecond, 10)
	assert.NotEmpty(t, over)
	over, _ = overSliding(spread, 200*time.Millisecond, 2*time.Millisecond, 10)
	assert.Empty(t, over)
}

// slidingWindow is the window of the sliding log of these tests.
const slidingWindow = time.Second

// slidingPolicy is the leased sliding log of these tests: 100 per second,
// leases of at most 10 units for 500 ms.
func slidingPolicy(t testing.TB) ratelimit.Policy {
	return leasedPolicy(t, ratelimit.SlidingLog{Limit: 100, Window: slidingWindow}, 0.1, 500*time.Millisecond)
}

// slidingShape shows a lease forgotten before its last admission leaves
// the window: the leases' units are spent 400 ms after they were taken,
// and a window after, when a log that counted them at their reservation
// has let them go, every instance hammers the subject until it is spent.
var slidingShape = shape{settle: 1500 * time.Millisecond, spendAfter: 400 * time.Millisecond, spend: 8, burstAfter: 995 * time.Millisecond}

// TestSlidingLogHistoryKeepsTheBound (issue 37 item 4): three instances
// lease a sliding log through an instance killed holding a lease, a
// partition and a Redis restart; the checker finds no window with more
// admissions than the limit.
func TestSlidingLogHistoryKeepsTheBound(t *testing.T) {
	p := slidingPolicy(t)
	all := leaseRounds(t, p, slidingShape, false, true)
	over, most := overSliding(all, slidingWindow, 2*time.Millisecond, 100)
	assert.Empty(t, over)
	t.Logf("%d admissions checked; the fullest window held %d of 100", len(all), most)
}

// TestSlidingLogCheckerFailsABrokenLease: the same workload on the broken
// build, a lease counted as admitted at its reservation: the checker
// must find a window over the limit.
func TestSlidingLogCheckerFailsABrokenLease(t *testing.T) {
	p := slidingPolicy(t)
	all := leaseRounds(t, p, slidingShape, true, false)
	over, most := overSliding(all, slidingWindow, 2*time.Millisecond, 100)
	assert.NotEmpty(t, over, "the checker did not see the broken build's excess")
	t.Logf("broken build, %d admissions, the fullest window held %d of 100: %v", len(all), most, over)
}

// TestRecordedLeasesAnswerLocally: one instance's hot subject of each
// algorithm whose state holds its leases (a token bucket, GCRA, a sliding
// log) is answered mostly from leases, every answer evaluated (a
// reservation's reply passes the reply checks: a sliding log's lease
// entry is up to its TTL in the future), and no more admitted than the
// algorithm's bound over the run.
func TestRecordedLeasesAnswerLocally(t *testing.T) {
	bp := bucketPolicies(t)
	for name, p := range map[string]ratelimit.Policy{"token bucket": bp["token bucket"], "gcra": bp["gcra"], "sliding log": slidingPolicy(t)} {
		t.Run(name, func(t *testing.T) {
			srv := redistest.Start(t)
			pols := []ratelimit.Policy{p}
			var local atomicCount
			l, err := New(provider(t, srv, redistest.RandomKeys(t), pols), Options{Policies: pols, Timeout: time.Second,
				Observe: func(_ ratelimit.PolicyID, ev Event, units int64) {
					if ev == Local {
						local.add(units)
					}
				}})
			require.NoError(t, err)
			defer l.Close()
			s := changetest.RandomSubject(t)
			start := time.Now()
			var n int64
			for range 150 {
				out := l.Evaluate(context.Background(), request(p, s))
				_, evaluated := out.(ratelimit.Evaluated)
				require.True(t, evaluated, "%v", out)
				if admitted(out) {
					n++
				}
			}
			bound := p.Limit()
			if name != "sliding log" {
				bound += int64(bucketPerMs*float64(time.Since(start).Milliseconds())) + 1
			}
			assert.LessOrEqual(t, n, bound)
			assert.GreaterOrEqual(t, n, p.Limit(), "the whole budget was admitted")
			assert.Greater(t, local.load(), n/2, "most from leases")
			t.Logf("%d admitted, %d from leases", n, local.load())
		})
	}
}
