package ratecarry_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/programs"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/ratecarry"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redisrate"
	"github.com/tech-log/tech-log-backend/adapter-outbound-cache-redis/redistest"
	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// The tests run on private servers with their own clock: TIME cannot be
// set, so every policy has a period of an hour and each bound adds what
// the policies admit over the test's interval on the server's clock
// (adds), a fraction of a unit unless an hour boundary falls inside.

const polAPI ratelimit.PolicyID = "api"

// change is a reload of policy "api" from revision 1 (algorithm from) to
// revision 2 (algorithm to).
type change struct{ name, from, to string }

// changes is every algorithm to itself, and one change of algorithm.
func changes() []change {
	var cs []change
	for _, a := range algorithms {
		cs = append(cs, change{a.Name, a.Name, a.Name})
	}
	return append(cs, change{"fixed_window-to-token_bucket", "fixed_window", "token_bucket"})
}

// reload is one change on a real server: the provider of each revision on
// one keyspace, and a Carrier over the new one.
type reload struct {
	old, neu   ratelimit.Policy
	prov1      ratelimit.EdgePort // an instance still on revision 1
	prov2      ratelimit.EdgePort // revision 2, without the Carrier
	carrier    *ratecarry.Carrier // revision 2 with it
	obs        *observed
	serverTime func(ceil bool) int64
}

func newReload(t *testing.T, srv *redistest.Server, ch change, oldLimit, newLimit int64) *reload {
	t.Helper()
	keys := redistest.RandomKeys(t)
	rc := clientAt(t, srv.Addr())
	r := &reload{
		old: policy(t, polAPI, 1, algorithmNamed(t, ch.from).Over(oldLimit, period)),
		neu: policy(t, polAPI, 2, algorithmNamed(t, ch.to).Over(newLimit, period)),
		obs: &observed{},
	}
	r.prov1 = provider(t, rc, keys, r.old)
	p2 := provider(t, rc, keys, r.neu)
	r.prov2 = p2
	r.carrier = carrier(t, p2, rc, keys, r.obs, [2]ratelimit.Policy{r.neu, r.old})
	r.serverTime = func(ceil bool) int64 { return serverMillis(t, rc, ceil) }
	return r
}

// TestRaiseAdmitsAtMostTheLargerLimit (issue 36 item 3, ADR 0039): for
// every algorithm, and across a change of algorithm, a subject that
// exhausted revision 1 (limit 5) is admitted under revision 2 (limit 20)
// through the Carrier so that in all it gets at most max(5, 20) plus what
// the policies add meanwhile, and at least what revision 2 leaves it less
// rounding; revision 1's state is emptied, so an instance still on it
// denies; a control subject given revision 2's fresh state (no Carrier)
// exceeds the bound, so the check can fail.
func TestRaiseAdmitsAtMostTheLargerLimit(t *testing.T) {
	srv := redistest.Start(t)
	for _, ch := range changes() {
		t.Run(ch.name, func(t *testing.T) {
			t.Parallel()
			r := newReload(t, srv, ch, smallLimit, largeLimit)
			s, control := randomSubject(t), randomSubject(t)
			t0 := r.serverTime(false)
			before := countUntilDenied(t, r.prov1, polAPI, s, 2*smallLimit)
			beforeControl := countUntilDenied(t, r.prov1, polAPI, control, 2*smallLimit)
			require.GreaterOrEqual(t, before, int64(smallLimit))
			tChange := r.serverTime(false)

			after := countUntilDenied(t, r.carrier, polAPI, s, 2*largeLimit)
			tEnd := r.serverTime(true)
			addsOld, addsNew := adds(r.old, t0, tChange), adds(r.neu, tChange, tEnd)
			bound := max(smallLimit, largeLimit) + addsOld + addsNew
			t.Logf("before %d, after %d; bound %d (refill %d + %d)", before, after, bound, addsOld, addsNew)
			assert.LessOrEqual(t, before+after, bound, "admitted in the window of the raise")
			assert.GreaterOrEqual(t, after, int64(largeLimit-smallLimit-roundingSlack), "the carry is over-conservative")
			assert.GreaterOrEqual(t, before+after, int64(largeLimit-roundingSlack))
			assert.Equal(t, []observation{{polAPI, ratecarry.Carried}}, r.obs.all(), "one check, at the first decision")
			assert.Equal(t, map[ratelimit.PolicyID]int64{polAPI: 1}, r.carrier.Checked())
			assert.False(t, admitted(t, ask(r.prov1, polAPI, s)), "an instance still on revision 1 is admitted after the raise")

			fresh := countUntilDenied(t, r.prov2, polAPI, control, 2*largeLimit)
			assert.Greater(t, beforeControl+fresh, bound, "a fresh revision-2 state keeps the bound too: the check proves nothing")
		})
	}
}

// TestLowerTakesEffectAtTheNextDecision: for every algorithm, and across a
// change of algorithm, a subject that consumed 8 of revision 1's 20 is
// denied at the very next decision under revision 2 (limit 5), and so is
// an instance still on revision 1, although it had units left.
func TestLowerTakesEffectAtTheNextDecision(t *testing.T) {
	srv := redistest.Start(t)
	const used = 8
	for _, ch := range changes() {
		t.Run(ch.name, func(t *testing.T) {
			t.Parallel()
			r := newReload(t, srv, ch, largeLimit, smallLimit)
			s := randomSubject(t)
			for i := range used {
				require.True(t, admitted(t, ask(r.prov1, polAPI, s)), "unit %d under revision 1", i+1)
			}
			tChange := r.serverTime(false)
			require.False(t, admitted(t, ask(r.carrier, polAPI, s)), "the next decision after lowering")
			assert.Equal(t, []observation{{polAPI, ratecarry.Carried}}, r.obs.all())
			assert.False(t, admitted(t, ask(r.prov1, polAPI, s)), "an instance still on revision 1 after lowering")
			after := countUntilDenied(t, r.carrier, polAPI, s, 2*smallLimit)
			assert.LessOrEqual(t, after, adds(r.neu, tChange, r.serverTime(true)), "admitted under revision 2 after lowering")
		})
	}
}

// TestCheckRunsOncePerSubject: the first decision of a subject runs the
// check (and the seed) on the Carrier's client; the second sends nothing
// but the provider's program (one EVALSHA on the server, nothing on the
// Carrier's client). A subject without any old state costs one read-only
// program, observed "nothing", and gets the full new budget. A full table
// (MaxSubjects 1) forgets: a subject seen again is checked again.
func TestCheckRunsOncePerSubject(t *testing.T) {
	srv := redistest.Start(t) // its own: the test reads the server's command statistics
	ctx := redistest.AdminCtx(t)
	keys := redistest.RandomKeys(t)
	rc := clientAt(t, srv.Addr())
	alg := algorithmNamed(t, "token_bucket")
	old, neu := policy(t, polAPI, 1, alg.Over(smallLimit, period)), policy(t, polAPI, 2, alg.Over(largeLimit, period))
	prov1, prov2 := provider(t, rc, keys, old), provider(t, rc, keys, neu)
	cc := clientAt(t, srv.Addr())
	var calls scriptCounter
	cc.AddHook(&calls)
	obs := &observed{}
	c, err := ratecarry.New(prov2, ratecarry.Options{Client: cc, Keys: keys, Policies: []ratelimit.Policy{neu},
		Predecessors: map[ratelimit.PolicyID]ratelimit.Policy{polAPI: old}, MaxSubjects: 1, Observe: obs.observe})
	require.NoError(t, err)

	s := randomSubject(t)
	for i := range 3 {
		require.True(t, admitted(t, ask(prov1, polAPI, s)), "unit %d under revision 1", i+1)
	}
	require.True(t, admitted(t, ask(c, polAPI, s)))
	assert.GreaterOrEqual(t, calls.n.Load(), int64(2), "the first decision runs the check and the seed")
	assert.Equal(t, []observation{{polAPI, ratecarry.Carried}}, obs.all())

	calls.n.Store(0)
	require.NoError(t, srv.Client().ConfigResetStat(ctx).Err())
	require.True(t, admitted(t, ask(c, polAPI, s)))
	stats := redistest.CommandStats(t, srv.Client())
	assert.Zero(t, calls.n.Load(), "the second decision ran a check")
	assert.Equal(t, int64(1), stats["evalsha"].Calls+stats["eval"].Calls, "programs run by the second decision: %+v", stats)
	assert.Len(t, obs.all(), 1, "the second decision was observed")

	// A subject without any old state: one read-only program, nothing
	// carried, the full budget (less the table's forgetting of s).
	fresh := randomSubject(t)
	calls.n.Store(0)
	tStart := serverMillis(t, rc, false)
	n := countUntilDenied(t, c, polAPI, fresh, 2*largeLimit)
	assert.Equal(t, int64(1), calls.n.Load(), "a subject without old state: one check (EVALSHA)")
	assert.GreaterOrEqual(t, n, int64(largeLimit))
	assert.LessOrEqual(t, n, largeLimit+adds(neu, tStart, serverMillis(t, rc, true)))
	assert.Equal(t, []observation{{polAPI, ratecarry.Carried}, {polAPI, ratecarry.Fresh}}, obs.all())
	assert.Equal(t, map[ratelimit.PolicyID]int64{polAPI: 1}, c.Checked(), "MaxSubjects 1")

	// The table held one subject: s was forgotten, so it is checked again;
	// its new state exists, so nothing is carried twice.
	calls.n.Store(0)
	require.True(t, admitted(t, ask(c, polAPI, s)))
	assert.Equal(t, int64(1), calls.n.Load(), "a forgotten subject is checked again")
	assert.Equal(t, ratecarry.Fresh, obs.all()[len(obs.all())-1].result)
}

// TestNewStateFirstCarriesNothing: when the new state exists already (a
// decision under revision 2 without a Carrier came first), the check
// observes "nothing" and changes nothing.
func TestNewStateFirstCarriesNothing(t *testing.T) {
	srv := redistest.Start(t)
	r := newReload(t, srv, change{"fixed_window", "fixed_window", "fixed_window"}, smallLimit, largeLimit)
	s := randomSubject(t)
	countUntilDenied(t, r.prov1, polAPI, s, 2*smallLimit)
	tStart := r.serverTime(false)
	require.True(t, admitted(t, ask(r.prov2, polAPI, s)))
	n := countUntilDenied(t, r.carrier, polAPI, s, 2*largeLimit)
	assert.Equal(t, []observation{{polAPI, ratecarry.Fresh}}, r.obs.all())
	assert.GreaterOrEqual(t, n, int64(largeLimit-1))
	assert.LessOrEqual(t, n, largeLimit-1+adds(r.neu, tStart, r.serverTime(true)))
}

// TestCheckFailureLetsTheDecisionGoOn: a Carrier whose client reaches no
// server (the provider's does) observes "error" at every decision (a
// failed check is not remembered) and the decision goes on, on a fresh
// state: the old state's consumption is not carried.
func TestCheckFailureLetsTheDecisionGoOn(t *testing.T) {
	srv := redistest.Start(t)
	keys := redistest.RandomKeys(t)
	rc := clientAt(t, srv.Addr())
	alg := algorithmNamed(t, "gcra")
	old, neu := policy(t, polAPI, 1, alg.Over(smallLimit, period)), policy(t, polAPI, 2, alg.Over(largeLimit, period))
	prov1, prov2 := provider(t, rc, keys, old), provider(t, rc, keys, neu)
	obs := &observed{}
	c := carrier(t, prov2, clientAt(t, deadAddr(t)), keys, obs, [2]ratelimit.Policy{neu, old})

	s := randomSubject(t)
	countUntilDenied(t, prov1, polAPI, s, 2*smallLimit)
	tStart := serverMillis(t, rc, false)
	require.True(t, admitted(t, ask(c, polAPI, s)), "the decision after a failed check")
	assert.Equal(t, []observation{{polAPI, ratecarry.Failed}}, obs.all())
	assert.Equal(t, map[ratelimit.PolicyID]int64{polAPI: 0}, c.Checked(), "a failed check is remembered")
	n := 1 + countUntilDenied(t, c, polAPI, s, 2*largeLimit)
	assert.GreaterOrEqual(t, n, int64(largeLimit), "a fresh state")
	assert.LessOrEqual(t, n, largeLimit+adds(neu, tStart, serverMillis(t, rc, true)))
	assert.Equal(t, int(n)+1, obs.count(polAPI, ratecarry.Failed), "every decision checks again")
	assert.Len(t, obs.all(), int(n)+1)
}

// TestConcurrentFirstDecisionsSeedOnce: 8 goroutines deciding the same
// subject at once right after the change (revision 1 exhausted 5 of 5,
// revision 2 limit 20) are admitted in all at most 15 plus refill: the
// seed happens once (one "carried", every other check "nothing").
func TestConcurrentFirstDecisionsSeedOnce(t *testing.T) {
	srv := redistest.Start(t)
	const workers = 8
	for _, ch := range changes() {
		t.Run(ch.name, func(t *testing.T) {
			t.Parallel()
			r := newReload(t, srv, ch, smallLimit, largeLimit)
			s := randomSubject(t)
			t0 := r.serverTime(false)
			before := countUntilDenied(t, r.prov1, polAPI, s, 2*smallLimit)
			require.GreaterOrEqual(t, before, int64(smallLimit))
			tChange := r.serverTime(false)

			start := make(chan struct{})
			var wg sync.WaitGroup
			got := make([]int64, workers)
			errs := make([]string, workers)
			for w := range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					for range 2*largeLimit + 1 {
						e, ok := ask(r.carrier, polAPI, s).(ratelimit.Evaluated)
						if !ok {
							errs[w] = "an outcome is not evaluated"
							return
						}
						if !e.Decision.Allowed {
							return
						}
						got[w]++
					}
					errs[w] = "no denial"
				}()
			}
			close(start)
			waitGroup(t, &wg, 30*time.Second)
			tEnd := r.serverTime(true)
			var after int64
			for w := range workers {
				assert.Empty(t, errs[w], "worker %d", w)
				after += got[w]
			}
			bound := int64(largeLimit-smallLimit) + adds(r.old, t0, tChange) + adds(r.neu, tChange, tEnd)
			t.Logf("after %d by %v; bound %d; observed %v", after, got, bound, r.obs.all())
			assert.LessOrEqual(t, after, bound, "admitted after the change")
			assert.GreaterOrEqual(t, after, int64(largeLimit-smallLimit-roundingSlack))
			assert.Equal(t, 1, r.obs.count(polAPI, ratecarry.Carried), "seeds")
			assert.Zero(t, r.obs.count(polAPI, ratecarry.Failed))
			assert.Len(t, r.obs.all(), r.obs.count(polAPI, ratecarry.Carried)+r.obs.count(polAPI, ratecarry.Fresh))
			assert.LessOrEqual(t, len(r.obs.all()), workers, "checks after the subject was remembered")
		})
	}
}

// waitGroup waits for wg at most d.
func waitGroup(t *testing.T, wg *sync.WaitGroup, d time.Duration) {
	t.Helper()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("the workers did not finish in %v", d)
	}
}

// TestEvaluateSetCarriesEveryMember: a set of two members, each with a
// predecessor exhausted (5 of 5; revision 2 limit 20), carries both at its
// first decision: the set is admitted at most 15 plus refill.
func TestEvaluateSetCarriesEveryMember(t *testing.T) {
	srv := redistest.Start(t)
	keys := redistest.RandomKeys(t)
	rc := clientAt(t, srv.Addr())
	const a, b ratelimit.PolicyID = "a", "b"
	fw, tb := algorithmNamed(t, "fixed_window"), algorithmNamed(t, "token_bucket")
	oldA, newA := policy(t, a, 1, fw.Over(smallLimit, period)), policy(t, a, 2, fw.Over(largeLimit, period))
	oldB, newB := policy(t, b, 1, tb.Over(smallLimit, period)), policy(t, b, 2, tb.Over(largeLimit, period))
	prov1, prov2 := provider(t, rc, keys, oldA, oldB), provider(t, rc, keys, newA, newB)
	obs := &observed{}
	c := carrier(t, prov2, rc, keys, obs, [2]ratelimit.Policy{newA, oldA}, [2]ratelimit.Policy{newB, oldB})

	s := randomSubject(t)
	t0 := serverMillis(t, rc, false)
	for _, id := range []ratelimit.PolicyID{a, b} {
		require.GreaterOrEqual(t, countUntilDenied(t, prov1, id, s, 2*smallLimit), int64(smallLimit))
	}
	tChange := serverMillis(t, rc, false)
	var after int64
	for range 2*largeLimit + 1 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		out := c.EvaluateSet(ctx, ratelimit.SetRequest{Members: []ratelimit.PolicyID{a, b}, SubjectDigest: s, Cost: 1,
			Deadline: time.Now().Add(5 * time.Second)})
		cancel()
		if !admitted(t, out) {
			break
		}
		after++
	}
	tEnd := serverMillis(t, rc, true)
	assert.ElementsMatch(t, []observation{{a, ratecarry.Carried}, {b, ratecarry.Carried}}, obs.all())
	bound := int64(largeLimit-smallLimit) + max(adds(oldA, t0, tChange)+adds(newA, tChange, tEnd), adds(oldB, t0, tChange)+adds(newB, tChange, tEnd))
	assert.LessOrEqual(t, after, bound, "set admissions after the change")
	assert.GreaterOrEqual(t, after, int64(largeLimit-smallLimit-roundingSlack))
	for _, id := range []ratelimit.PolicyID{a, b} {
		assert.False(t, admitted(t, ask(prov1, id, s)), "%s: an instance still on revision 1", id)
	}
}

// TestChargesCarryFirst: the fallback's reconciliation charges
// (EvaluateAfterCharge, Charge) carry before they charge.
func TestChargesCarryFirst(t *testing.T) {
	srv := redistest.Start(t)
	r := newReload(t, srv, change{"sliding_log", "sliding_log", "sliding_log"}, smallLimit, largeLimit)
	req := func(s ratelimit.SubjectDigest) ratelimit.Request {
		return ratelimit.Request{PolicyID: polAPI, SubjectDigest: s, Cost: 1, Deadline: time.Now().Add(5 * time.Second)}
	}
	s1, s2 := randomSubject(t), randomSubject(t)
	for _, s := range []ratelimit.SubjectDigest{s1, s2} {
		countUntilDenied(t, r.prov1, polAPI, s, 2*smallLimit)
	}
	ctx := redistest.AdminCtx(t)
	out, charged := r.carrier.EvaluateAfterCharge(ctx, req(s1), 2)
	assert.True(t, charged)
	assert.True(t, admitted(t, out))
	_ = r.carrier.Charge(ctx, req(s2), 1)
	assert.Equal(t, []observation{{polAPI, ratecarry.Carried}, {polAPI, ratecarry.Carried}}, r.obs.all())
	for _, s := range []ratelimit.SubjectDigest{s1, s2} {
		assert.False(t, admitted(t, ask(r.prov1, polAPI, s)), "an instance still on revision 1")
	}
}

// TestNewRefusesInvalidOptions: every invalid option is refused with
// ErrInvalidOptions (collected, each named).
func TestNewRefusesInvalidOptions(t *testing.T) {
	keys := redistest.RandomKeys(t)
	client := clientAt(t, deadAddr(t)) // never used: New sends nothing
	fw := algorithmNamed(t, "fixed_window")
	cur, prev := policy(t, polAPI, 2, fw.Over(largeLimit, period)), policy(t, polAPI, 1, fw.Over(smallLimit, period))
	other := policy(t, "other", 1, fw.Over(smallLimit, period))
	valid := func() ratecarry.Options {
		return ratecarry.Options{Client: client, Keys: keys, Policies: []ratelimit.Policy{cur, other},
			Predecessors: map[ratelimit.PolicyID]ratelimit.Policy{polAPI: prev}}
	}
	var inner ratecarry.Inner = stubInner{}
	for _, c := range []struct {
		name   string
		inner  ratecarry.Inner
		edit   func(*ratecarry.Options)
		errors []string
	}{
		{"no predecessors", inner, func(o *ratecarry.Options) { o.Predecessors = nil }, []string{"Predecessors: none"}},
		{"predecessor of an unknown policy", inner, func(o *ratecarry.Options) {
			o.Predecessors = map[ratelimit.PolicyID]ratelimit.Policy{"gone": prev}
		}, []string{`"gone" is not among`, "none"}},
		{"predecessor of another ID", inner, func(o *ratecarry.Options) {
			o.Predecessors = map[ratelimit.PolicyID]ratelimit.Policy{polAPI: other}
		}, []string{"not another revision"}},
		{"predecessor at the same revision", inner, func(o *ratecarry.Options) {
			o.Predecessors = map[ratelimit.PolicyID]ratelimit.Policy{polAPI: policy(t, polAPI, 2, fw.Over(smallLimit, period))}
		}, []string{"not another revision"}},
		{"zero predecessor", inner, func(o *ratecarry.Options) {
			o.Predecessors = map[ratelimit.PolicyID]ratelimit.Policy{polAPI: {}}
		}, []string{"not another revision"}},
		{"MaxSubjects negative", inner, func(o *ratecarry.Options) { o.MaxSubjects = -1 }, []string{"MaxSubjects -1"}},
		{"MaxSubjects too large", inner, func(o *ratecarry.Options) { o.MaxSubjects = ratecarry.MaxSubjects + 1 }, []string{"MaxSubjects"}},
		{"no inner", nil, func(*ratecarry.Options) {}, []string{"required"}},
		{"no client", inner, func(o *ratecarry.Options) { o.Client = nil }, []string{"required"}},
		{"no keys", inner, func(o *ratecarry.Options) { o.Keys = nil }, []string{"required"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := valid()
			c.edit(&o)
			got, err := ratecarry.New(c.inner, o)
			require.ErrorIs(t, err, ratecarry.ErrInvalidOptions)
			assert.Nil(t, got)
			for _, e := range c.errors {
				assert.ErrorContains(t, err, e)
			}
		})
	}
	for _, n := range []int{0, 1, ratecarry.MaxSubjects} {
		o := valid()
		o.MaxSubjects = n
		_, err := ratecarry.New(inner, o)
		assert.NoError(t, err, "MaxSubjects %d", n)
	}
}

// TestEmptiedStateIsNeverCarriedAsSpent: after a carry, the emptied
// predecessor state outlives the carried state (its TTL is the old
// policy's, the new state's the new one's); once the new state is gone, a
// later check (another instance, a cleared table) finds the carry's mark
// and carries nothing more, so the subject gets the new budget back, not
// the old limit as spent. A predecessor state that consumed nothing still
// leaves a new state.
func TestEmptiedStateIsNeverCarriedAsSpent(t *testing.T) {
	srv := redistest.Start(t)
	for _, used := range []int64{1, 0} {
		keys := redistest.RandomKeys(t)
		rc := clientAt(t, srv.Addr())
		old := policy(t, polAPI, 1, algorithmNamed(t, "token_bucket").Over(5, period))
		neu := policy(t, polAPI, 2, algorithmNamed(t, "token_bucket").Over(20, period))
		prov1, prov2 := provider(t, rc, keys, old), provider(t, rc, keys, neu)
		obs := &observed{}
		c := carrier(t, prov2, rc, keys, obs, [2]ratelimit.Policy{neu, old})
		subject := randomSubject(t)
		oldKey, err := redisrate.StateKey(keys, old, subject)
		require.NoError(t, err)
		newKey, err := redisrate.StateKey(keys, neu, subject)
		require.NoError(t, err)
		require.True(t, admitted(t, ask(prov1, polAPI, subject)))
		if used == 0 {
			// A state that has consumed nothing: one unit taken two hours
			// ago, refilled since.
			at := serverMillis(t, rc, false) - 2*time.Hour.Milliseconds()
			_, st := programs.Charge(old, nil, at, 1)
			require.Zero(t, programs.Consumed(old, st, at+2*time.Hour.Milliseconds()))
			require.NoError(t, rc.Set(context.Background(), oldKey, string(st), time.Hour).Err())
		}
		require.True(t, admitted(t, ask(c, polAPI, subject)))
		require.Equal(t, 1, obs.count(polAPI, ratecarry.Carried), "used %d", used)
		n, err := rc.Exists(context.Background(), newKey).Result()
		require.NoError(t, err)
		require.Equal(t, int64(1), n, "used %d: a new state is left", used)

		// The new state expires (deleted here) while the emptied one lives.
		require.NoError(t, rc.Del(context.Background(), newKey).Err())
		later := &observed{}
		c2 := carrier(t, prov2, rc, keys, later, [2]ratelimit.Policy{neu, old})
		got := countUntilDenied(t, c2, polAPI, subject, 40)
		assert.Zero(t, later.count(polAPI, ratecarry.Carried), "used %d: the mark stops a second carry", used)
		assert.Equal(t, int64(20), got, "used %d: the new budget, not the emptied old limit as spent", used)
	}
}
