package reliability_test

// Property tests (pgregory.net/rapid) of the Go reference model, which the
// Lua programs are tested against step for step (programs package).

import (
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/programs"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

const horizon = ratelimit.MaxHorizonMillis

// wide draws an integer in lo..hi that often sits at the edges or on a
// power of two, so the full accepted range is exercised, not just its
// middle.
func wide(t *rapid.T, label string, lo, hi int64) int64 {
	if hi <= lo {
		return lo
	}
	switch rapid.IntRange(0, 4).Draw(t, label+"/mode") {
	case 0:
		return rapid.Int64Range(lo, min(hi, lo+100)).Draw(t, label)
	case 1:
		return rapid.Int64Range(max(lo, hi-100), hi).Draw(t, label)
	case 2:
		k := rapid.IntRange(0, 62).Draw(t, label+"/log2")
		v := int64(1) << k
		v += rapid.Int64Range(-1, 1).Draw(t, label+"/jitter")
		return min(max(v, lo), hi)
	default:
		return rapid.Int64Range(lo, hi).Draw(t, label)
	}
}

func ms(n int64) time.Duration { return time.Duration(n) * time.Millisecond }

// genPolicy draws a policy spec within the bounds NewPolicy documents;
// limits and windows are capped by maxLimit and maxMillis. A spec NewPolicy
// still rejects is skipped (rare by construction).
func genPolicy(t *rapid.T, maxLimit, maxMillis int64) ratelimit.Policy {
	alg := ratelimit.Algorithm(rapid.IntRange(1, 3).Draw(t, "algorithm"))
	grace := wide(t, "grace", 1, min(maxMillis, horizon/2))
	var params ratelimit.Params
	var limit int64
	switch alg {
	case ratelimit.AlgorithmFixedWindow:
		limit = wide(t, "limit", 1, min(maxLimit, ratelimit.MaxExactInt/2))
		w := wide(t, "window", 1, min(maxMillis, horizon-grace))
		params = ratelimit.FixedWindow{Limit: limit, Window: ms(w)}
	case ratelimit.AlgorithmSlidingWindowCounter:
		limit = wide(t, "limit", 1, min(maxLimit, ratelimit.MaxExactInt/ratelimit.WeightScale))
		w := wide(t, "window", 1, min(maxMillis, ratelimit.MaxExactInt/ratelimit.WeightScale, (horizon-grace)/2))
		params = ratelimit.SlidingWindowCounter{Limit: limit, Window: ms(w)}
	default:
		limit = wide(t, "capacity", 1, min(maxLimit, ratelimit.MaxExactInt))
		period := wide(t, "period", 1, min(maxMillis, ratelimit.MaxExactInt/limit, horizon))
		refill := wide(t, "refill", 1, ratelimit.MaxExactInt)
		fill := (limit*period + refill - 1) / refill
		if fill+grace > horizon {
			grace = max(1, horizon-fill)
		}
		params = ratelimit.TokenBucket{Capacity: limit, RefillTokens: refill, RefillPeriod: ms(period)}
	}
	spec := ratelimit.PolicySpec{
		ID:                 "prop",
		Revision:           wide(t, "revision", 1, ratelimit.MaxExactInt),
		Algorithm:          alg,
		Params:             params,
		MaxCost:            wide(t, "maxCost", 1, limit),
		CleanupGrace:       ms(grace),
		MaxClockRegression: ms(wide(t, "regression", 0, min(maxMillis, horizon))),
		FailurePolicy:      ratelimit.FailClosed,
	}
	p, err := ratelimit.NewPolicy(spec)
	if err != nil {
		t.Skipf("generator produced a rejected spec: %v", err)
	}
	return p
}

// span is the policy's window, or for the bucket its time to fill from
// empty, in milliseconds.
func span(p ratelimit.Policy) int64 {
	switch v := p.Params().(type) {
	case ratelimit.FixedWindow:
		return v.Window.Milliseconds()
	case ratelimit.SlidingWindowCounter:
		return v.Window.Milliseconds()
	case ratelimit.TokenBucket:
		return (v.Capacity*v.RefillPeriod.Milliseconds() + v.RefillTokens - 1) / v.RefillTokens
	case ratelimit.GCRA, ratelimit.SlidingLog, ratelimit.LeakyBucket, ratelimit.Concurrency:
		return p.WindowMillis()
	}
	return 1
}

func checkExact(t *rapid.T, p ratelimit.Policy, r programs.Reply, st programs.State) {
	for i, v := range r.Ints() {
		if v < 0 || v > ratelimit.MaxExactInt {
			t.Fatalf("%v: reply integer %d = %d outside 0..2^53-1 (%+v)", p, i, v, r)
		}
	}
	if st == nil {
		return
	}
	f, err := st.Decode()
	if err != nil {
		t.Fatalf("%v: stored state %x does not decode: %v", p, []byte(st), err)
	}
	for k, v := range f {
		if v < 0 || v > ratelimit.MaxExactInt {
			t.Fatalf("%v: stored %s = %d is not an integer in 0..2^53-1", p, k, v)
		}
	}
}

// TestPropertyModelStaysExact: for any policy NewPolicy accepts (the full
// range) and any traffic (clock jumps, small regressions, any cost), the
// model never answers or stores an integer above 2^53-1, and every reply
// passes the reply check.
func TestPropertyModelStaysExact(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p := genPolicy(t, ratelimit.MaxExactInt, horizon)
		now := wide(t, "now0", 0, ratelimit.MaxServerMillis)
		var st programs.State
		steps := rapid.IntRange(1, 25).Draw(t, "steps")
		for i := range steps {
			var dt int64
			if rapid.Bool().Draw(t, "jump") {
				dt = wide(t, "dt", 0, ratelimit.MaxServerMillis)
			} else {
				dt = rapid.Int64Range(-50, 5000).Draw(t, "dt")
			}
			now = min(max(now+dt, 0), ratelimit.MaxServerMillis)
			cost := wide(t, "cost", 1, p.MaxCost())
			r, next := programs.Evaluate(p, st, now, cost)
			checkExact(t, p, r, next)
			if err := r.Check(p); err != nil {
				t.Fatalf("step %d: %v: %v", i, p, err)
			}
			st = next
		}
	})
}

// TestPropertyTokenRefillIndependentOfFrequency: a drained bucket refills
// at the same rate however often it is evaluated. With intermediate
// evaluations that took S tokens in total, the final probe sees exactly S
// fewer tokens than a probe with no intermediate traffic, and the tokens
// seen are floor(elapsed * refill / period) (the bucket is kept below its
// capacity, so no refill is lost to the cap).
func TestPropertyTokenRefillIndependentOfFrequency(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		capacity := wide(t, "capacity", 1, 1_000_000)
		period := wide(t, "period", 1, 1_000_000)
		refill := wide(t, "refill", 1, 1_000_000)
		p, err := ratelimit.NewPolicy(ratelimit.PolicySpec{
			ID: "refill", Revision: 1, Algorithm: ratelimit.AlgorithmTokenBucket,
			Params:  ratelimit.TokenBucket{Capacity: capacity, RefillTokens: refill, RefillPeriod: ms(period)},
			MaxCost: capacity, CleanupGrace: time.Millisecond, FailurePolicy: ratelimit.FailClosed,
		})
		if err != nil {
			t.Fatalf("spec within bounds rejected: %v", err)
		}
		t0 := wide(t, "t0", 0, 1<<40)
		r, drained := programs.Evaluate(p, nil, t0, capacity)
		if r.Status != programs.StatusAllowed || r.Remaining != 0 {
			t.Fatalf("drain: %+v", r)
		}
		dmax := (capacity - 1) * period / refill // floor(d*refill/period) <= capacity-1
		d := wide(t, "elapsed", 0, dmax)
		want := d * refill / period

		probe, _ := programs.Evaluate(p, drained, t0+d, 1)
		seen := func(r programs.Reply) int64 {
			if r.Status == programs.StatusAllowed {
				return r.Remaining + 1
			}
			if r.Status != programs.StatusDenied {
				t.Fatalf("probe: %+v", r)
			}
			return 0
		}
		if got := seen(probe); got != want {
			t.Fatalf("single probe after %d ms sees %d tokens, want floor(%d*%d/%d) = %d", d, got, d, refill, period, want)
		}

		st, now, taken := drained, t0, int64(0)
		for range rapid.IntRange(0, 20).Draw(t, "evaluations") {
			now = rapid.Int64Range(now, t0+d).Draw(t, "at")
			cost := wide(t, "cost", 1, capacity)
			r, next := programs.Evaluate(p, st, now, cost)
			if r.Status == programs.StatusAllowed {
				taken += cost
			}
			st = next
		}
		final, _ := programs.Evaluate(p, st, t0+d, 1)
		if got := seen(final); got != want-taken {
			t.Fatalf("after intermediate evaluations taking %d, the probe sees %d tokens, want %d - %d", taken, got, want, taken)
		}
	})
}

// TestPropertyRetryAfterIsHonest: with no other traffic, a request denied
// at t with RetryAfter r is allowed at t+r; for the fixed window and the
// token bucket it is still denied at t+r-1ms (the hint is the least wait).
// Policies of every algorithm with limits up to 10^6 and windows up to
// 10^7 ms; traffic of random costs at random gaps.
func TestPropertyRetryAfterIsHonest(t *testing.T) {
	total := 0
	rapid.Check(t, func(t *rapid.T) {
		p := genPolicy(t, 1_000_000, 10_000_000)
		now := wide(t, "now0", 0, 1<<40)
		var st programs.State
		for range rapid.IntRange(1, 40).Draw(t, "steps") {
			if now > ratelimit.MaxServerMillis/2 {
				break // keep t+retryAfter below MaxServerMillis
			}
			now += wide(t, "gap", 0, 2*span(p))
			cost := wide(t, "cost", 1, p.MaxCost())
			r, next := programs.Evaluate(p, st, now, cost)
			if r.Status == programs.StatusDenied {
				total++
				at := r.EffectiveNowMillis
				if r.RetryAfterMillis < 1 {
					t.Fatalf("%v: denied with retry-after %d", p, r.RetryAfterMillis)
				}
				late, _ := programs.Evaluate(p, st, at+r.RetryAfterMillis, cost)
				if late.Status != programs.StatusAllowed {
					t.Fatalf("%v: denied at %d (%+v), still %v at t+retryAfter", p, at, r, late.Status)
				}
				if p.Algorithm() != ratelimit.AlgorithmSlidingWindowCounter {
					early, _ := programs.Evaluate(p, st, at+r.RetryAfterMillis-1, cost)
					if early.Status != programs.StatusDenied {
						t.Fatalf("%v: denied at %d (%+v), already %v at t+retryAfter-1ms", p, at, r, early.Status)
					}
				}
			}
			if r.Status != programs.StatusAllowed && r.Status != programs.StatusDenied {
				t.Fatalf("%v: %+v", p, r)
			}
			st = next
		}
	})
	if total == 0 {
		t.Fatal("no run produced a denial: the property was never exercised")
	}
}
