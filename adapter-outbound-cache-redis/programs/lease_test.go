package programs

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tech-log/tech-log-backend/shared-contract/ratelimit"
)

// leasePolicies are the algorithms that record leases (ADR 0042), each
// as one bucket of 10 units refilled at one every 100 ms: a token bucket
// and a GCRA. Their levels are the same continuous line, so every lease
// test expects the same answers of both.
func leasePolicies(t *testing.T) map[string]ratelimit.Policy {
	t.Helper()
	return map[string]ratelimit.Policy{
		"token bucket": mustPolicy(t, ratelimit.AlgorithmTokenBucket,
			ratelimit.TokenBucket{Capacity: 10, RefillTokens: 1, RefillPeriod: 100 * time.Millisecond}, 10, time.Second, time.Second),
		"gcra": mustPolicy(t, ratelimit.AlgorithmGCRA,
			ratelimit.GCRA{Rate: 1, Period: 100 * time.Millisecond, Burst: 10}, 10, time.Second, time.Second),
	}
}

// eachLeasePolicy runs f for each of leasePolicies on a fresh miniredis.
func eachLeasePolicy(t *testing.T, f func(t *testing.T, p ratelimit.Policy, m *mini)) {
	for name, p := range leasePolicies(t) {
		t.Run(name, func(t *testing.T) { f(t, p, newMini(t)) })
	}
}

// leasePrograms returns algorithm a's reservation and give-back programs
// (ADR 0042).
func leasePrograms(t *testing.T, a ratelimit.Algorithm) (lease, giveBack Program) {
	t.Helper()
	c, err := loadCatalog()
	require.NoError(t, err)
	lease, ok := c.leases[a]
	require.True(t, ok)
	giveBack, ok = c.giveBacks[a]
	require.True(t, ok)
	return lease, giveBack
}

// tbRun runs one of p's programs at nowMillis: "decide", "charge",
// "refund" (arg: the receipt's instant), "lease" (arg: the ttl; replaces
// nothing), "replace" (a lease of 300 ms replacing the one reserved at
// arg) or "giveback" (arg: the reservation's instant).
func tbRun(t *testing.T, m *mini, p ratelimit.Policy, kind string, now, cost, arg int64) Reply {
	t.Helper()
	lease, giveBack := leasePrograms(t, p.Algorithm())
	var prog Program
	args := Args(p, cost)
	switch kind {
	case "decide":
		prog = mustProgram(t, p.Algorithm())
	case "charge":
		prog, _ = ChargeFor(p.Algorithm())
	case "refund":
		prog, _ = RefundFor(p.Algorithm())
		args = append(args, arg)
	case "lease":
		prog, args = lease, append(args, arg, 0)
	case "replace":
		prog, args = lease, append(args, 300, arg)
	case "giveback":
		prog, args = giveBack, append(args, arg, 300)
	}
	v, err := m.run(prog, now, "tb", args...)
	require.NoError(t, err)
	return toReply(t, v)
}

func records(t *testing.T, m *mini) []LeaseRecord {
	t.Helper()
	st := getState(t, m.c, "tb")
	if st == nil {
		return nil
	}
	r, err := st.LeaseRecords()
	require.NoError(t, err)
	return r
}

// TestLeaseRecordKeepsRefillBelowLeasedUnits: a reservation is a decision
// of its cost that records the lease; while it lives the bucket never
// refills into its units (the level stops at capacity less them), after
// its end the cap rises at the end and the level refills from there at
// the rate, and every write drops the records that ended.
func TestLeaseRecordKeepsRefillBelowLeasedUnits(t *testing.T) {
	eachLeasePolicy(t, leaseRecordKeepsRefillBelowLeasedUnits)
}

func leaseRecordKeepsRefillBelowLeasedUnits(t *testing.T, p ratelimit.Policy, m *mini) {
	const t0 = 1_800_000_000_000
	r := tbRun(t, m, p, "lease", t0, 4, 300)
	require.Equal(t, StatusAllowed, r.Status)
	assert.Equal(t, int64(6), r.Remaining)
	assert.Equal(t, int64(t0+400), r.ResetAtMillis, "full again 400 ms after, no earlier than the lease's end")
	assert.Equal(t, []LeaseRecord{{t0, t0 + 300, 4}}, records(t, m))

	r = tbRun(t, m, p, "decide", t0+250, 7, 0)
	assert.Equal(t, StatusDenied, r.Status, "without the record the level would be 8.5")
	assert.Equal(t, int64(6), r.Remaining, "capped at capacity less the leased units")
	r = tbRun(t, m, p, "decide", t0+250, 6, 0)
	require.Equal(t, StatusAllowed, r.Status)
	assert.Equal(t, int64(0), r.Remaining)
	assert.Len(t, records(t, m), 1, "the live record is kept")

	// The lease ended at t0+300: from 0 at t0+250 the level refills to
	// 0.5 by then, below its cap; from t0+300 on, the cap is the capacity.
	r = tbRun(t, m, p, "decide", t0+900, 7, 0)
	assert.Equal(t, StatusDenied, r.Status)
	assert.Equal(t, int64(6), r.Remaining, "6.5 tokens 650 ms after the charge")
	r = tbRun(t, m, p, "decide", t0+900, 6, 0)
	require.Equal(t, StatusAllowed, r.Status)
	assert.Empty(t, records(t, m), "the ended record is dropped by the write")

	// A record that ended between two writes, below its cap: lease 8 of
	// 10 for 100 ms and spend the other 2; 250 ms later the level is
	// min(0 + 2.5, the cap at the end 2 + 1.5) = 2.5.
	m2 := newMini(t)
	r = tbRun(t, m2, p, "lease", t0, 8, 100)
	require.Equal(t, StatusAllowed, r.Status)
	require.Equal(t, StatusAllowed, tbRun(t, m2, p, "decide", t0, 2, 0).Status)
	r = tbRun(t, m2, p, "decide", t0+250, 3, 0)
	assert.Equal(t, StatusDenied, r.Status)
	assert.Equal(t, int64(2), r.Remaining)

	// Here the cap binds at the end: lease 5 for 100 ms, the level 5 below
	// a cap of 5; 500 ms later the line would be 10, the cap 5 until the
	// end and 5 + 4 after it: 9.
	m3 := newMini(t)
	require.Equal(t, StatusAllowed, tbRun(t, m3, p, "lease", t0, 5, 100).Status)
	r = tbRun(t, m3, p, "decide", t0+500, 10, 0)
	assert.Equal(t, StatusDenied, r.Status)
	assert.Equal(t, int64(9), r.Remaining, "the level waited at the cap until the lease ended")
}

// TestGiveBackRemovesItsRecord: a give-back returns at most its record's
// units and removes the record; one that finds no live record (the lease
// ended, or another instant) gives back nothing and writes nothing.
func TestGiveBackRemovesItsRecord(t *testing.T) {
	eachLeasePolicy(t, giveBackRemovesItsRecord)
}

func giveBackRemovesItsRecord(t *testing.T, p ratelimit.Policy, m *mini) {
	const t0 = 1_800_000_000_000
	require.Equal(t, StatusAllowed, tbRun(t, m, p, "lease", t0, 5, 300).Status)
	require.Equal(t, StatusAllowed, tbRun(t, m, p, "lease", t0+1, 3, 300).Status)
	require.Len(t, records(t, m), 2)

	r := tbRun(t, m, p, "giveback", t0+100, 3, t0+7)
	assert.Equal(t, int64(0), r.RetryAfterMillis, "no lease reserved then")
	assert.Len(t, records(t, m), 2)

	// The level: 2 at t0+1, refilled to 3 at t0+100 (cap 2 = 10-8: so 2).
	r = tbRun(t, m, p, "giveback", t0+100, 9, t0)
	assert.Equal(t, int64(5), r.RetryAfterMillis, "at most the record's units")
	assert.Equal(t, int64(7), r.Remaining, "the capped 2 plus 5, below the cap 7")
	assert.Equal(t, []LeaseRecord{{t0 + 1, t0 + 301, 3}}, records(t, m))

	r = tbRun(t, m, p, "giveback", t0+100, 3, t0)
	assert.Equal(t, int64(0), r.RetryAfterMillis, "given back once")

	r = tbRun(t, m, p, "giveback", t0+400, 3, t0+1)
	assert.Equal(t, int64(0), r.RetryAfterMillis, "the lease ended: its units refilled at the rate")
}

// TestNormalRefundStopsAtTheCap: a refund of an ordinary admission gives
// back no more than the cap that live leases leave.
func TestNormalRefundStopsAtTheCap(t *testing.T) {
	eachLeasePolicy(t, normalRefundStopsAtTheCap)
}

func normalRefundStopsAtTheCap(t *testing.T, p ratelimit.Policy, m *mini) {
	const t0 = 1_800_000_000_000
	require.Equal(t, StatusAllowed, tbRun(t, m, p, "decide", t0, 4, 0).Status)
	require.Equal(t, StatusAllowed, tbRun(t, m, p, "lease", t0, 6, 300).Status)
	r := tbRun(t, m, p, "refund", t0, 4, t0)
	assert.Equal(t, int64(4), r.RetryAfterMillis, "up to the cap, 10 - 6")
	assert.Equal(t, int64(4), r.Remaining)
	r = tbRun(t, m, p, "refund", t0, 4, t0)
	assert.Equal(t, int64(0), r.RetryAfterMillis, "at the cap: nothing more (without the record: 4 more)")
	r = tbRun(t, m, p, "charge", t0+50, 10, 0)
	assert.Equal(t, int64(0), r.Remaining, "a charge saturates at empty")
	assert.Len(t, records(t, m), 1, "and keeps the record")
}

// TestLeaseClashAndBound: a second reservation in the same millisecond is
// denied with retryAfter 1 and writes nothing; a reservation beyond the
// level is denied with the refill time; a state with more records than
// the capacity's units, or a malformed record, is incompatible.
func TestLeaseClashAndBound(t *testing.T) {
	eachLeasePolicy(t, leaseClashAndBound)
}

func leaseClashAndBound(t *testing.T, p ratelimit.Policy, m *mini) {
	const t0 = 1_800_000_000_000
	require.Equal(t, StatusAllowed, tbRun(t, m, p, "lease", t0, 2, 300).Status)
	before := getState(t, m.c, "tb")
	r := tbRun(t, m, p, "lease", t0, 2, 300)
	assert.Equal(t, StatusDenied, r.Status)
	assert.Equal(t, int64(1), r.RetryAfterMillis)
	assert.Equal(t, before, getState(t, m.c, "tb"), "nothing written")
	r = tbRun(t, m, p, "lease", t0+1, 9, 300)
	assert.Equal(t, StatusDenied, r.Status)
	assert.Equal(t, int64(100), r.RetryAfterMillis, "8 left, one more token in 100 ms")

	// Records whose units exceed the capacity: incompatible, unchanged.
	bad := append(State(nil), before...)
	rs := len(bad) - len(strconv.FormatInt(p.Revision(), 10))
	bad = append(bad[:rs:rs], 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 11)
	bad[before.packedLen()] = 2
	bad = append(bad, before[rs:]...)
	require.NoError(t, m.c.Set(t.Context(), "tb", string(bad), 0).Err())
	assert.Equal(t, StatusStateIncompatible, tbRun(t, m, p, "decide", t0+2, 1, 0).Status)
	assert.Equal(t, StatusStateIncompatible, tbRun(t, m, p, "giveback", t0+2, 1, t0).Status)
}

// TestReservationReplacesTheInstancesPreviousLease: a reservation drops
// the record of the lease it replaces (spent: the cap rises by its units,
// the level stays), so one instance holds one record, and may reserve
// again in the same millisecond.
func TestReservationReplacesTheInstancesPreviousLease(t *testing.T) {
	eachLeasePolicy(t, reservationReplacesTheInstancesPreviousLease)
}

func reservationReplacesTheInstancesPreviousLease(t *testing.T, p ratelimit.Policy, m *mini) {
	const t0 = 1_800_000_000_000
	require.Equal(t, StatusAllowed, tbRun(t, m, p, "lease", t0, 4, 300).Status)
	r := tbRun(t, m, p, "replace", t0, 3, t0)
	require.Equal(t, StatusAllowed, r.Status, "the same millisecond, the previous record gone")
	assert.Equal(t, int64(3), r.Remaining)
	assert.Equal(t, []LeaseRecord{{t0, t0 + 300, 3}}, records(t, m))
	// 250 ms later the level refilled from 3 to 5.5, below the cap of
	// 10 - 3; with the replaced record's 4 units still there the cap
	// would be 3.
	r = tbRun(t, m, p, "decide", t0+250, 5, 0)
	assert.Equal(t, StatusAllowed, r.Status)
	r = tbRun(t, m, p, "replace", t0+251, 2, t0+5)
	assert.Equal(t, StatusDenied, r.Status, "a replaced instant without a record drops nothing")
	assert.Equal(t, []LeaseRecord{{t0, t0 + 300, 3}}, records(t, m))
}

// TestLeaseProgramsAgree: on one random history of decisions, charges,
// refunds, reservations, replacements and give-backs at whole
// milliseconds, the token bucket and the GCRA of leasePolicies (the same
// continuous level) answer the same status, remaining, reset (the level
// to the millisecond) and units given back, and hold the same records.
func TestLeaseProgramsAgree(t *testing.T) {
	pols := leasePolicies(t)
	tb, gc := pols["token bucket"], pols["gcra"]
	mt, mg := newMini(t), newMini(t)
	rng := rand.New(rand.NewPCG(20261208, 42))
	now := int64(1_800_000_000_000)
	var leases []int64     // reservation instants
	pick := func() int64 { // the latest lease half the time
		if rng.IntN(2) == 0 {
			return leases[len(leases)-1]
		}
		return leases[rng.IntN(len(leases))]
	}
	for step := range 2000 {
		now += rng.Int64N(60)
		kind, cost, arg := "decide", 1+rng.Int64N(3), int64(0)
		if len(leases) > 64 {
			leases = leases[32:]
		}
		switch rng.IntN(8) {
		case 0, 1:
			kind, arg = "lease", 50+rng.Int64N(250)
			cost = 1 + rng.Int64N(5)
		case 2:
			if len(leases) > 0 {
				kind, arg = "giveback", pick()
				cost = 1 + rng.Int64N(5)
			}
		case 3:
			if len(leases) > 0 {
				kind, arg = "replace", pick()
			}
		case 4:
			kind = "refund"
			arg = now - rng.Int64N(100)
		case 5:
			kind = "charge"
		}
		a := tbRun(t, mt, tb, kind, now, cost, arg)
		b := tbRun(t, mg, gc, kind, now, cost, arg)
		where := fmt.Sprintf("step %d %s cost %d arg %d at +%d", step, kind, cost, arg, now-1_800_000_000_000)
		require.Equal(t, a.Status, b.Status, where)
		require.Equal(t, a.Remaining, b.Remaining, where)
		require.Equal(t, a.ResetAtMillis, b.ResetAtMillis, where+": the same level to the millisecond")
		if kind == "giveback" || kind == "refund" {
			require.Equal(t, a.RetryAfterMillis, b.RetryAfterMillis, where)
		}
		require.Equal(t, records(t, mt), records(t, mg), where)
		if (kind == "lease" || kind == "replace") && a.Status == StatusAllowed {
			leases = append(leases, now)
		}
	}
}

// TestSlidingLogLeaseIsAdmittedAtItsEnd: a sliding log's reservation
// (ADR 0042) is one entry at the lease's end, placed in instant order:
// it counts from the reservation until a window after its end; a
// give-back lowers that entry (removed at 0, the key with the last one).
func TestSlidingLogLeaseIsAdmittedAtItsEnd(t *testing.T) {
	p := mustPolicy(t, ratelimit.AlgorithmSlidingLog, ratelimit.SlidingLog{Limit: 10, Window: time.Second}, 10, time.Second, time.Second)
	m := newMini(t)
	const t0 = 1_800_000_000_000
	entries := func() []LogEntry {
		st := getState(t, m.c, "tb")
		if st == nil {
			return nil
		}
		e, err := st.LogEntries()
		require.NoError(t, err)
		return e
	}
	r := tbRun(t, m, p, "lease", t0, 4, 300)
	require.Equal(t, StatusAllowed, r.Status)
	assert.Equal(t, int64(6), r.Remaining)
	assert.Equal(t, int64(t0+1300), r.ResetAtMillis, "a window after the lease's end")
	r = tbRun(t, m, p, "decide", t0+10, 6, 0)
	require.Equal(t, StatusAllowed, r.Status)
	assert.Equal(t, []LogEntry{{t0 + 10, 6}, {t0 + 300, 4}}, entries(), "in instant order")
	// A window after the admission, the lease still counts: it is
	// admitted at its end.
	r = tbRun(t, m, p, "decide", t0+1100, 7, 0)
	assert.Equal(t, StatusDenied, r.Status)
	assert.Equal(t, int64(6), r.Remaining)
	assert.Equal(t, int64(200), r.RetryAfterMillis, "until the lease's entry leaves, a window after its end")
	require.Equal(t, StatusAllowed, tbRun(t, m, p, "decide", t0+1100, 6, 0).Status)
	r = tbRun(t, m, p, "decide", t0+1301, 1, 0)
	assert.Equal(t, int64(3), r.Remaining, "the lease's entry has left")

	m = newMini(t)
	require.Equal(t, StatusAllowed, tbRun(t, m, p, "lease", t0, 5, 300).Status)
	r = tbRun(t, m, p, "giveback", t0+100, 3, t0)
	assert.Equal(t, int64(3), r.RetryAfterMillis)
	assert.Equal(t, int64(8), r.Remaining)
	assert.Equal(t, []LogEntry{{t0 + 300, 2}}, entries())
	r = tbRun(t, m, p, "giveback", t0+100, 5, t0+1)
	assert.Equal(t, int64(0), r.RetryAfterMillis, "no lease of that instant")
	r = tbRun(t, m, p, "giveback", t0+400, 5, t0)
	assert.Equal(t, int64(2), r.RetryAfterMillis, "at most what the entry holds, after its end too")
	assert.Equal(t, int64(10), r.Remaining)
	assert.Nil(t, getState(t, m.c, "tb"), "the last entry gone: the key too")
	r = tbRun(t, m, p, "replace", t0+500, 2, t0+500)
	require.Equal(t, StatusAllowed, r.Status)
	assert.Equal(t, []LogEntry{{t0 + 800, 2}}, entries(), "a replaced lease's entry stays: it is its admissions")
}
