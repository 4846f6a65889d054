package rateplan_test

import (
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/rateplan"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redisrate"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// The store's tests run on a private server with its own clock: the
// server's TIME cannot be set, so every policy has a period of an hour
// and each bound adds what the policy admits over the test's interval on
// the server's clock (adds, from TIME read before and after), a fraction
// of a unit unless an hour boundary falls inside.

// roundingSlack is how many units the carry may count above what was
// admitted, so that a raise admits that many fewer: Store.Set reads the
// server's TIME to the millisecond (floored), while GCRA and the leaky
// bucket decide on its microsecond, so a state admitted earlier in the
// same millisecond can read as one more unit in use. It only
// under-admits; the carry is otherwise exact.
const roundingSlack = 1

// world is one algorithm's plans on a real server: base policy "api"
// decided by api-free or api-gold, the provider that decides them, and
// the store that moves subjects between them.
type world struct {
	rc         *redis.Client
	free, gold ratelimit.Policy
	prov       *redisrate.Provider
	store      *rateplan.Store
}

func newWorld(t *testing.T, srv *redistest.Server, alg algorithm) *world {
	t.Helper()
	keys := redistest.RandomKeys(t)
	w := &world{free: policy(t, polAPIFree, alg.Over(freeLimit, period)), gold: policy(t, polAPIGold, alg.Over(goldLimit, period))}
	pols := []ratelimit.Policy{policy(t, polAPI, alg.Over(freeLimit, period)), w.free, w.gold}
	w.rc = clientAt(t, srv.Addr())
	w.prov = provider(t, w.rc, keys, pols)
	var err error
	w.store, err = rateplan.NewStore(w.rc, keys, plansOf(t, pols), pols)
	require.NoError(t, err)
	return w
}

// consume takes n units of free for subject (all admitted), or, with
// n < 0, everything free admits; it returns how many were admitted.
func (w *world) consume(t *testing.T, subject ratelimit.SubjectDigest, n int64) int64 {
	t.Helper()
	if n < 0 {
		got := countUntilDenied(t, w.prov, polAPIFree, subject, 2*freeLimit)
		require.GreaterOrEqual(t, got, int64(freeLimit))
		return got
	}
	for i := range n {
		require.True(t, admitted(t, ask(w.prov, polAPIFree, subject)), "unit %d of %d", i+1, n)
	}
	return n
}

// set moves subject to plan and checks the one move of base "api".
func (w *world) set(t *testing.T, subject ratelimit.SubjectDigest, plan ratelimit.PlanID, from, to ratelimit.PolicyID) rateplan.Move {
	t.Helper()
	var ch rateplan.Change
	var err error
	if plan == "" {
		ch, err = w.store.Unset(redistest.AdminCtx(t), subject)
	} else {
		ch, err = w.store.Set(redistest.AdminCtx(t), subject, plan)
	}
	require.NoError(t, err)
	require.Len(t, ch.Moves, 1, "%+v", ch)
	m := ch.Moves[0]
	require.Equal(t, polAPI, m.Base)
	require.Equal(t, from, m.From)
	require.Equal(t, to, m.To)
	// What the new state holds: at least what was consumed, at most the
	// new limit (more when the subject left that policy earlier having
	// consumed more there).
	require.GreaterOrEqual(t, m.Carried, min(m.Consumed, w.policyOf(to).Limit()), "carried less than was consumed")
	require.LessOrEqual(t, m.Carried, w.policyOf(to).Limit())
	return m
}

func (w *world) policyOf(id ratelimit.PolicyID) ratelimit.Policy {
	if id == polAPIGold {
		return w.gold
	}
	return w.free
}

// TestRaiseAdmitsAtMostTheLargerLimit (issue 36 item 3): for every
// algorithm, a subject that consumed free's limit (or half of it) and is
// moved to gold is admitted in all at most max(free, gold) plus what the
// policies add meanwhile, and at least what gold leaves it less rounding;
// the free state is spent, so an instance that still decides by free
// denies; a subject given gold's fresh state instead (no carry) would
// exceed the bound, so the check can fail. Then lowering back to free
// denies at the next decision, under free and under gold (an instance
// whose cache still says gold).
func TestRaiseAdmitsAtMostTheLargerLimit(t *testing.T) {
	srv := redistest.Start(t)
	for _, alg := range algorithms {
		t.Run(alg.Name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, srv, alg)
			for _, c := range []struct {
				name    string
				consume int64 // -1: everything free admits
			}{{"exhausted", -1}, {"half", freeLimit / 2}} {
				t.Run(c.name, func(t *testing.T) {
					s, control := randomSubject(t), randomSubject(t)
					t0 := serverMillis(t, w.rc, false)
					before := w.consume(t, s, c.consume)
					beforeControl := w.consume(t, control, c.consume)
					tSet := serverMillis(t, w.rc, false)
					m := w.set(t, s, planGold, polAPIFree, polAPIGold)
					addsFree := adds(w.free, t0, tSet)
					assert.Equal(t, min(m.Consumed, goldLimit), m.Carried, "no history under gold: carried is what was consumed")
					assert.LessOrEqual(t, m.Consumed, before+roundingSlack, "carried more than was admitted")
					assert.GreaterOrEqual(t, m.Consumed, before-addsFree, "carried less than was admitted and still counted")
					require.False(t, admitted(t, ask(w.prov, polAPIFree, s)), "an instance still on free is admitted after the raise")

					after := countUntilDenied(t, w.prov, polAPIGold, s, 2*goldLimit)
					tEnd := serverMillis(t, w.rc, true)
					addsGold := adds(w.gold, tSet, tEnd)
					bound := max(freeLimit, goldLimit) + addsFree + addsGold
					t.Logf("before %d, consumed %d, carried %d, after %d; bound %d (refill %d + %d)", before, m.Consumed, m.Carried, after, bound, addsFree, addsGold)
					assert.LessOrEqual(t, before+after, bound, "admitted in the window of the raise")
					assert.LessOrEqual(t, after, goldLimit-m.Carried+addsGold, "admitted under gold beyond what the carry leaves")
					assert.GreaterOrEqual(t, after, goldLimit-before-roundingSlack, "the carry is over-conservative")

					fresh := countUntilDenied(t, w.prov, polAPIGold, control, 2*goldLimit)
					assert.Greater(t, beforeControl+fresh, bound, "a fresh gold state keeps the bound too: the check proves nothing")

					// Lowering: gold's consumption is carried to free, at
					// most free's limit, and gold is spent.
					m = w.set(t, s, planFree, polAPIGold, polAPIFree)
					assert.Equal(t, int64(freeLimit), m.Carried)
					assert.False(t, admitted(t, ask(w.prov, polAPIFree, s)), "the next decision under free after lowering")
					assert.False(t, admitted(t, ask(w.prov, polAPIGold, s)), "an instance still on gold after lowering")
				})
			}
		})
	}
}

// TestLowerTakesEffectAtTheNextDecision: for every algorithm, a subject
// on gold that consumed more than free's limit is denied at the next
// decision after it is moved back to free (Unset: the default plan), and
// an instance still deciding by gold denies it too, although gold had
// units left; one that consumed less than free's limit gets exactly what
// free leaves it (plus refill), and nothing more from gold.
func TestLowerTakesEffectAtTheNextDecision(t *testing.T) {
	srv := redistest.Start(t)
	for _, alg := range algorithms {
		t.Run(alg.Name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, srv, alg)
			for _, c := range []struct {
				name  string
				used  int64
				unset bool
			}{{"above-free", freeLimit + 3, true}, {"below-free", freeLimit - 2, false}} {
				t.Run(c.name, func(t *testing.T) {
					s := randomSubject(t)
					m := w.set(t, s, planGold, polAPIFree, polAPIGold)
					require.Zero(t, m.Consumed)
					for i := range c.used {
						require.True(t, admitted(t, ask(w.prov, polAPIGold, s)), "unit %d under gold", i+1)
					}
					plan := planFree
					if c.unset {
						plan = ""
					}
					tSet := serverMillis(t, w.rc, false)
					m = w.set(t, s, plan, polAPIGold, polAPIFree)
					assert.LessOrEqual(t, m.Consumed, c.used+roundingSlack, "carried more than was admitted")
					assert.GreaterOrEqual(t, m.Consumed, c.used-roundingSlack)
					_, assigned, err := w.store.Get(redistest.AdminCtx(t), s)
					require.NoError(t, err)
					assert.Equal(t, !c.unset, assigned)

					after := countUntilDenied(t, w.prov, polAPIFree, s, 2*freeLimit)
					tEnd := serverMillis(t, w.rc, true)
					left := max(0, freeLimit-m.Carried)
					assert.GreaterOrEqual(t, after, left)
					assert.LessOrEqual(t, after, left+adds(w.free, tSet, tEnd), "admitted under free after lowering")
					assert.False(t, admitted(t, ask(w.prov, polAPIGold, s)), "an instance still on gold after lowering")
				})
			}
		})
	}
}

// TestAlgorithmsCoverEveryAlgorithm: the tables above name every
// algorithm the contract has, so a new one is not left out.
func TestAlgorithmsCoverEveryAlgorithm(t *testing.T) {
	var want, got []string
	for _, s := range ratelimit.Algorithms() {
		want = append(want, s.Name)
	}
	for _, a := range algorithms {
		got = append(got, a.Name)
		require.Equal(t, a.Name, a.Over(freeLimit, period).Algorithm().String())
	}
	require.ElementsMatch(t, want, got)
}

// TestSetRefusesAnUnknownPlan: a plan the file does not have is refused
// before anything is written.
func TestSetRefusesAnUnknownPlan(t *testing.T) {
	srv := redistest.Start(t)
	w := newWorld(t, srv, algorithms[0])
	s := randomSubject(t)
	_, err := w.store.Set(redistest.AdminCtx(t), s, "platinum")
	require.ErrorIs(t, err, rateplan.ErrUnknownPlan)
	_, assigned, err := w.store.Get(redistest.AdminCtx(t), s)
	require.NoError(t, err)
	require.False(t, assigned)
}

// TestRoundTripKeepsTheBound: a subject that spent gold, is lowered to
// free and raised to gold again within the window is admitted, in all, at
// most gold's limit plus what gold adds meanwhile: a change back must not
// hand out again what the subject already consumed under gold (before
// ADR 0040 each round trip handed out gold - free again: 35 of 20).
func TestRoundTripKeepsTheBound(t *testing.T) {
	srv := redistest.Start(t)
	for _, alg := range algorithms {
		t.Run(alg.Name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, srv, alg)
			for _, used := range []int64{goldLimit, freeLimit + 3} {
				s := randomSubject(t)
				w.set(t, s, planGold, polAPIFree, polAPIGold)
				t0 := serverMillis(t, w.rc, false)
				for i := range used {
					require.True(t, admitted(t, ask(w.prov, polAPIGold, s)), "unit %d under gold", i+1)
				}
				w.set(t, s, planFree, polAPIGold, polAPIFree)
				w.set(t, s, planGold, polAPIFree, polAPIGold)
				again := countUntilDenied(t, w.prov, polAPIGold, s, 2*goldLimit)
				tEnd := serverMillis(t, w.rc, true)
				assert.LessOrEqual(t, used+again, goldLimit+adds(w.gold, t0, tEnd), "gold %d, then %d after gold -> free -> gold", used, again)
				assert.GreaterOrEqual(t, used+again, int64(goldLimit-roundingSlack), "the round trip is over-conservative")
			}
		})
	}
}
