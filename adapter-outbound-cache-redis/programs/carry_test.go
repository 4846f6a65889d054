package programs

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// policyOf is a valid policy of algorithm a with a random limit of
// 1..40 and a period of 200 ms..3 s.
func policyOf(t *testing.T, rng *rand.Rand, a ratelimit.Algorithm) ratelimit.Policy {
	t.Helper()
	limit := 1 + rng.Int64N(40)
	per := time.Duration(200+rng.Int64N(2800)) * time.Millisecond
	var params ratelimit.Params
	switch a {
	case ratelimit.AlgorithmFixedWindow:
		params = ratelimit.FixedWindow{Limit: limit, Window: per}
	case ratelimit.AlgorithmSlidingWindowCounter:
		params = ratelimit.SlidingWindowCounter{Limit: limit, Window: per}
	case ratelimit.AlgorithmTokenBucket:
		params = ratelimit.TokenBucket{Capacity: limit, RefillTokens: 1 + rng.Int64N(limit), RefillPeriod: per}
	case ratelimit.AlgorithmGCRA:
		params = ratelimit.GCRA{Rate: 1 + rng.Int64N(limit), Period: per, Burst: limit}
	case ratelimit.AlgorithmSlidingLog:
		params = ratelimit.SlidingLog{Limit: limit, Window: per}
	case ratelimit.AlgorithmConcurrency:
		params = ratelimit.Concurrency{Limit: limit, MaxHold: per}
	case ratelimit.AlgorithmLeakyBucket:
		params = ratelimit.LeakyBucket{Rate: 1 + rng.Int64N(limit), Period: per, QueueSize: limit, DelayAfter: limit, MaxDelay: time.Minute}
	}
	return mustPolicy(t, a, params, limit, time.Second, 2*time.Second)
}

// run sends a request of one unit at each instant of at to p from st and
// returns the units admitted by each instant (cumulative).
func run(p ratelimit.Policy, st State, at []int64) []int64 {
	out := make([]int64, len(at))
	var n int64
	for i, now := range at {
		r, next := Evaluate(p, st, now, 1)
		if r.Status == StatusAllowed {
			n++
			st = next
		}
		out[i] = n
	}
	return out
}

// changeCase is one random change: pred's history up to the change at
// tc, then a schedule of one-unit requests after it.
type changeCase struct {
	pred, succ ratelimit.Policy
	predState  State
	tc         int64
	after      []int64
}

func randomChange(t *testing.T, rng *rand.Rand, a, b ratelimit.Algorithm) changeCase {
	c := changeCase{pred: policyOf(t, rng, a), succ: policyOf(t, rng, b)}
	now := int64(1_000_000)
	for range rng.IntN(80) {
		now += rng.Int64N(120)
		cost := 1 + rng.Int64N(c.pred.Limit())
		if r, next := Evaluate(c.pred, c.predState, now, cost); r.Status == StatusAllowed {
			c.predState = next
		}
	}
	c.tc = now + rng.Int64N(50)
	at := c.tc
	for range 1 + rng.IntN(200) {
		c.after = append(c.after, at)
		at += rng.Int64N(60)
	}
	return c
}

// checkChange checks the change's bound with seed as succ's state at tc:
// by every instant after the change the successor admits at most what it
// would from a state charged with pred's consumption (min(Consumed, its
// limit) units: its limit less that, plus what it admits from a state
// spent to the last unit at tc), so that with what pred had admitted and
// still counted, at most max(pred's limit, succ's limit) plus what succ
// adds after tc. It returns a description of the first violation, "" when
// none.
func checkChange(c changeCase, seed State) string {
	consumed := Consumed(c.pred, c.predState, c.tc)
	if consumed > c.pred.Limit() {
		return fmt.Sprintf("consumed %d above pred's limit %d", consumed, c.pred.Limit())
	}
	_, spent := Charge(c.succ, nil, c.tc, c.succ.Limit())
	adds := run(c.succ, spent, c.after) // what succ adds after tc
	got := run(c.succ, seed, c.after)
	carried := min(consumed, c.succ.Limit())
	for i := range c.after {
		if got[i] > c.succ.Limit()-carried+adds[i] {
			return fmt.Sprintf("by %d ms after the change: %d admitted, bound %d (limit %d, carried %d, adds %d)",
				c.after[i]-c.tc, got[i], c.succ.Limit()-carried+adds[i], c.succ.Limit(), carried, adds[i])
		}
		if consumed+got[i] > max(c.pred.Limit(), c.succ.Limit())+adds[i] {
			return fmt.Sprintf("by %d ms after the change: %d before and %d after, above max(%d, %d) + %d",
				c.after[i]-c.tc, consumed, got[i], c.pred.Limit(), c.succ.Limit(), adds[i])
		}
	}
	return ""
}

// TestCarryKeepsTheBound: for every pair of algorithms (a plan change may
// change the algorithm, a revision may change the parameters), random
// histories under the predecessor and random requests after the change:
// the carried state never admits above the bound of ADR 0039; and the
// same histories from a fresh state (what a new key gives today) break it
// in some case, so the check can fail.
func TestCarryKeepsTheBound(t *testing.T) {
	seed := time.Now().UnixNano()
	if s := os.Getenv("TLB_CARRY_SEED"); s != "" {
		var err error
		seed, err = strconv.ParseInt(s, 10, 64)
		require.NoError(t, err, "TLB_CARRY_SEED")
	}
	t.Logf("seed %d (TLB_CARRY_SEED replays it)", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 39))
	var algs []ratelimit.Algorithm
	for _, s := range ratelimit.Algorithms() {
		algs = append(algs, s.Algorithm)
	}
	freshBroke := 0
	for _, a := range algs {
		for _, b := range algs {
			for i := range 60 {
				c := randomChange(t, rng, a, b)
				if why := checkChange(c, Carry(c.pred, c.predState, c.succ, c.tc)); why != "" {
					t.Fatalf("%s -> %s, case %d (seed %d): %s", a, b, i, seed, why)
				}
				if checkChange(c, nil) != "" {
					freshBroke++
				}
			}
		}
	}
	require.Positive(t, freshBroke, "a fresh budget at the change breaks the bound somewhere; else the check proves nothing")
	t.Logf("a fresh budget broke the bound in %d of %d cases", freshBroke, len(algs)*len(algs)*60)
}

// TestConsumed: nothing for a missing state; the units a fresh state
// admitted; the whole limit for a state the model refuses.
func TestConsumed(t *testing.T) {
	p := smallPolicy(t, ratelimit.AlgorithmFixedWindow, time.Second)
	require.Zero(t, Consumed(p, nil, 1_000_000))
	_, st := Evaluate(p, nil, 1_000_000, 3)
	require.Equal(t, int64(3), Consumed(p, st, 1_000_000))
	require.Equal(t, p.Limit(), Consumed(p, State("not a state"), 1_000_000))
}
