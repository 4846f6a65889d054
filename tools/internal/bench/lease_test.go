package bench

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// syntheticLease is a valid lease phase of reps repetitions: per
// repetition k (1-based factor f), the leased limiter admits 100000 f/s
// on the hot subject with 2 commands per run, the unleased 5000 f/s and
// redis_rate 4000 f/s with 4 commands per call; p99s 10, 500 and 800 µs;
// on the nearly spent subject the leased one decides 9000 f/s, p99 1100,
// the unleased 10000 f/s, p99 1000; under the concurrency limit the
// holding limiter makes 3000 f/s requests (two script calls each), p99
// 600, against 5000 f/s decisions, p99 500.
func syntheticLease(reps int) *LeasePhase {
	start := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	ph := &LeasePhase{Settings: LeaseSettings{
		Mode: ModeFull, Started: start, Finished: start.Add(time.Minute), RedisVersion: "7.0.15",
		Reps: reps, RunSeconds: 1, Warmup: 10, Concurrency: []int{1, 16, 64},
		HotLimit: leaseHotLimit, HotWindowSeconds: 3600, NearlyLimit: leaseNearlyLimit, NearlyRemaining: 500, NearlyConcurrency: 16,
		MaxShare: leaseMaxShare, TTLMillis: 200, PipelineMaxBatch: 16, HoldLimit: leaseHoldLimit, HoldMaxHoldMillis: 30_000,
	}}
	hot := func(name string, c, rep int, ops, p99 float64, cmds int64) LeaseRun {
		r := LeaseRun{Scenario: LeaseScenarioHot, Limiter: name, Concurrency: c, Rep: rep, Seconds: 1,
			Admitted: int64(ops), AdmittedPerSec: ops, DecisionsPerSec: ops, P50Micros: p99 / 2, P99Micros: p99, RedisCommands: cmds, ScriptCalls: cmds / 4}
		if name == LeaseLeased {
			r.Reserved, r.Local = 1, int64(ops)-1
		}
		return r
	}
	for rep := range reps {
		f := float64(rep + 1)
		for _, c := range ph.Settings.Concurrency {
			ph.Runs = append(ph.Runs,
				hot(LeaseLeased, c, rep, 100_000*f, 10, 8),
				hot(LeaseUnleased, c, rep, 5_000*f, 500, int64(4*5_000*f)),
				hot(FamilyRedisRate, c, rep, 4_000*f, 800, int64(4*4_000*f)),
			)
		}
		for _, c := range ph.Settings.Concurrency {
			for _, x := range []struct {
				name     string
				ops, p99 float64
				calls    int64
			}{{LeaseHolding, 3_000 * f, 600, 2}, {LeaseUnleased, 5_000 * f, 500, 1}} {
				ph.Runs = append(ph.Runs, LeaseRun{Scenario: LeaseScenarioHolds, Limiter: x.name, Concurrency: c, Rep: rep, Seconds: 1,
					Admitted: int64(x.ops), AdmittedPerSec: x.ops, DecisionsPerSec: x.ops, P50Micros: x.p99 / 2, P99Micros: x.p99,
					RedisCommands: 4 * x.calls * int64(x.ops), ScriptCalls: x.calls * int64(x.ops)})
			}
		}
		for _, x := range []struct {
			name     string
			ops, p99 float64
		}{{LeaseLeased, 9_000 * f, 1_100}, {LeaseUnleased, 10_000 * f, 1_000}} {
			ph.Runs = append(ph.Runs, LeaseRun{Scenario: LeaseScenarioNearly, Limiter: x.name, Concurrency: 16, Rep: rep, Seconds: 1,
				Admitted: 500, Denied: int64(x.ops) - 500, AdmittedPerSec: 500, DecisionsPerSec: x.ops, P50Micros: 100, P99Micros: x.p99,
				RedisCommands: 3 * int64(x.ops), ScriptCalls: int64(x.ops)})
		}
	}
	ph.Summaries = summarizeLease(ph.Runs)
	return ph
}

// TestSummarizeLeaseAndTargets: medians per scenario, limiter and
// concurrency in the phase's order, the leased limiter's ratios paired
// by repetition, and the issue-37 targets judged on them.
func TestSummarizeLeaseAndTargets(t *testing.T) {
	ph := syntheticLease(3)
	sums := ph.Summaries
	require.Len(t, sums, 3*3+2+3*2)
	assert.Equal(t, []string{LeaseLeased, LeaseUnleased, FamilyRedisRate}, []string{sums[0].Limiter, sums[1].Limiter, sums[2].Limiter})
	assert.Equal(t, []int{1, 1, 1, 16, 16, 16, 64, 64, 64}, func() []int {
		var cs []int
		for _, s := range sums[:9] {
			cs = append(cs, s.Concurrency)
		}
		return cs
	}())
	l := sums[0]
	assert.Equal(t, 3, l.Reps)
	assert.InDelta(t, 200_000, l.AdmittedPerSec, 1e-9, "median of 100000, 200000, 300000")
	assert.InDelta(t, 8.0/200_000, l.CommandsPerAdmitted, 1e-12)
	assert.InDelta(t, 20, l.OpsVsUnleased, 1e-9)
	assert.InDelta(t, 25, l.OpsVsRedisRate, 1e-9)
	assert.InDelta(t, 10.0/800, l.P99VsRedisRate, 1e-12)
	assert.InDelta(t, 1, l.Reserved, 1e-9)
	assert.Zero(t, sums[1].OpsVsRedisRate, "only the leased row carries ratios")
	n := sums[9]
	assert.Equal(t, LeaseScenarioNearly, n.Scenario)
	assert.Equal(t, LeaseLeased, n.Limiter)
	assert.InDelta(t, 0.9, n.OpsVsUnleased, 1e-9, "decisions per second, paired")
	assert.InDelta(t, 1.1, n.P99VsUnleased, 1e-9)
	assert.Zero(t, n.OpsVsRedisRate, "no redis_rate on the nearly spent subject")
	assert.InDelta(t, 500, n.Admitted, 1e-9)
	h, u := sums[11], sums[12]
	assert.Equal(t, []string{LeaseScenarioHolds, LeaseHolding, LeaseScenarioHolds, LeaseUnleased}, []string{h.Scenario, h.Limiter, u.Scenario, u.Limiter})
	assert.Equal(t, 1, h.Concurrency)
	assert.InDelta(t, 0.6, h.OpsVsUnleased, 1e-9, "acquire and release against one decision, paired")
	assert.InDelta(t, 1.2, h.P99VsUnleased, 1e-9)
	assert.InDelta(t, 2, h.ScriptCallsPerAdmitted, 1e-9)
	assert.Zero(t, u.OpsVsUnleased, "only the holding row carries ratios")
	assert.Equal(t, 64, sums[len(sums)-1].Concurrency)

	res := &Results{Mode: ModeFull, Lease: ph}
	ts := leaseTargets(res)
	require.Len(t, ts, len(leaseTargetIDs))
	want := map[string]string{
		TargetLeaseCommands: StatusMet, TargetLeaseVsRedisRate: StatusMet, TargetLeaseP99VsRedisRate: StatusMet,
		TargetLeaseNearlyOps: StatusMet, TargetLeaseNearlyP99: StatusMet,
	}
	for i, tg := range ts {
		assert.Equal(t, leaseTargetIDs[i], tg.ID)
		assert.Equal(t, want[tg.ID], tg.Status, "%s measured %v (%s)", tg.ID, tg.Measured, tg.Where)
	}
	assert.Contains(t, ts[1].Where, "c=1 25.0x, c=64 25.0x")

	// One repetition where the leased limiter is slower: the paired
	// median moves, the targets follow.
	for i, r := range ph.Runs {
		if r.Scenario == LeaseScenarioNearly && r.Limiter == LeaseLeased && r.Rep > 0 {
			ph.Runs[i].DecisionsPerSec /= 2
			ph.Runs[i].P99Micros *= 3
		}
		if r.Scenario == LeaseScenarioHot && r.Limiter == LeaseLeased && r.Concurrency == 64 {
			ph.Runs[i].AdmittedPerSec /= 10
		}
	}
	res.Recompute()
	got := map[string]Target{}
	for _, tg := range leaseTargets(res) {
		got[tg.ID] = tg
	}
	assert.Equal(t, StatusMissed, got[TargetLeaseNearlyOps].Status)
	assert.InDelta(t, 0.45, got[TargetLeaseNearlyOps].Measured, 1e-9)
	assert.Equal(t, StatusMissed, got[TargetLeaseNearlyP99].Status)
	assert.Equal(t, StatusMissed, got[TargetLeaseVsRedisRate].Status)
	assert.InDelta(t, 2.5, got[TargetLeaseVsRedisRate].Measured, 1e-9)
	assert.Contains(t, got[TargetLeaseVsRedisRate].Where, "worst: c=64")

	for _, tg := range leaseTargets(&Results{}) {
		assert.Equal(t, StatusNotMeasured, tg.Status, "%s without a lease phase", tg.ID)
	}
	noC64 := syntheticLease(1)
	noC64.Settings.Concurrency = []int{1, 16}
	var kept []LeaseRun
	for _, r := range noC64.Runs {
		if r.Concurrency != 64 {
			kept = append(kept, r)
		}
	}
	noC64.Runs, noC64.Summaries = kept, summarizeLease(kept)
	assert.Empty(t, validateLease(&Results{Mode: ModeFull, Lease: noC64}))
	for _, tg := range leaseTargets(&Results{Lease: noC64}) {
		if tg.ID == TargetLeaseVsRedisRate {
			assert.Equal(t, StatusNotMeasured, tg.Status, "c=64 was not measured")
		}
	}
}

// TestValidateLease: a complete phase passes; a missing phase, a
// missing run, a denial on the hot subject, a nearly spent budget
// exceeded and a scenario that denied too little fail.
func TestValidateLease(t *testing.T) {
	res := &Results{Mode: ModeFull, Lease: syntheticLease(2)}
	require.Empty(t, validateLease(res))
	require.NoError(t, ValidateLease(res.Lease))

	assert.NotEmpty(t, validateLease(&Results{Mode: ModeFull}), "no lease phase")
	assert.NotEmpty(t, validateLease(&Results{Mode: ModeSmoke, Lease: syntheticLease(2)}), "mode differs from the results'")
	for name, breakIt := range map[string]func(ph *LeasePhase){
		"missing run": func(ph *LeasePhase) { ph.Runs = ph.Runs[1:] },
		"hot denial":  func(ph *LeasePhase) { ph.Runs[1].Denied = 1 },
		"no local":    func(ph *LeasePhase) { ph.Runs[0].Local = 0 },
		"over budget": func(ph *LeasePhase) {
			ph.Runs[len(ph.Runs)-1].Admitted = ph.Settings.NearlyRemaining + 1
		},
		"few denied":    func(ph *LeasePhase) { ph.Runs[len(ph.Runs)-1].Denied = 3 },
		"errors":        func(ph *LeasePhase) { ph.Runs[2].Errors = 1 },
		"summaries":     func(ph *LeasePhase) { ph.Summaries = ph.Summaries[:3] },
		"settings":      func(ph *LeasePhase) { ph.Settings.NearlyRemaining = 0 },
		"no hold limit": func(ph *LeasePhase) { ph.Settings.HoldLimit = 0 },
		"hold denied":   func(ph *LeasePhase) { ph.Runs[lastRun(ph, LeaseScenarioHolds, LeaseHolding)].Denied = 1 },
		"no release": func(ph *LeasePhase) {
			i := lastRun(ph, LeaseScenarioHolds, LeaseHolding)
			ph.Runs[i].ScriptCalls = ph.Runs[i].Admitted
		},
		"hold run missing": func(ph *LeasePhase) {
			i := lastRun(ph, LeaseScenarioHolds, LeaseUnleased)
			ph.Runs = append(ph.Runs[:i], ph.Runs[i+1:]...)
		},
	} {
		ph := syntheticLease(2)
		breakIt(ph)
		assert.NotEmpty(t, validateLease(&Results{Mode: ModeFull, Lease: ph}), name)
	}
}

// lastRun is the index of ph's last run of limiter in scenario (-1 when
// there is none).
func lastRun(ph *LeasePhase, scenario, limiter string) int {
	for i := len(ph.Runs) - 1; i >= 0; i-- {
		if ph.Runs[i].Scenario == scenario && ph.Runs[i].Limiter == limiter {
			return i
		}
	}
	return -1
}

// TestRenderLease: the section names every row and the targets, and
// RenderDoc fills its markers.
func TestRenderLease(t *testing.T) {
	ph := syntheticLease(3)
	body := RenderLease(ph)
	assert.Contains(t, body, "fixed window of 1000000000 per hour")
	assert.Contains(t, body, "| 64 | provider_leased | 200000 |")
	assert.Contains(t, body, "| 1 | redis_rate | 8000 |")
	assert.Contains(t, body, "| provider_leased | 18000 |")
	assert.Contains(t, body, "| 25.0x, ")
	assert.Contains(t, body, "0.900x, 1.100x")
	assert.Equal(t, len(leaseTargetIDs), strings.Count(body, "| Issue 37:"))
	assert.Contains(t, body, "0.00004 commands")
	assert.Contains(t, body, "concurrency limit of 10000 (maxHold 30000 ms")
	assert.Contains(t, body, "| 16 | provider_holding | 6000 | 300.0 µs | 600.0 µs | 2.00 | 0.600x, 1.200x |")
	assert.Contains(t, body, "| 64 | provider | 10000 | 250.0 µs | 500.0 µs | 1.00 | - |")

	doc := "x\n" + beginMarker("lease") + "\nstale\n" + endMarker("lease") + "\ny\n"
	out, err := renderDocSections([]byte(doc), &Results{Lease: ph}, []string{"lease"})
	require.NoError(t, err)
	got, ok := SectionBody(out, "lease")
	require.True(t, ok)
	assert.Equal(t, strings.TrimSpace(body), got)
	out, err = renderDocSections([]byte(doc), &Results{}, []string{"lease"})
	require.NoError(t, err)
	got, _ = SectionBody(out, "lease")
	assert.Equal(t, "Not measured.", got)
}

func TestCountCommandsAndTexts(t *testing.T) {
	total, scripts := countCommands(map[string]CommandStat{
		"evalsha": {Calls: 10}, "eval": {Calls: 1}, "get": {Calls: 11}, "set": {Calls: 11},
		"info": {Calls: 5}, "config|resetstat": {Calls: 1}, "config": {Calls: 1},
	})
	assert.Equal(t, int64(33), total)
	assert.Equal(t, int64(11), scripts)
	assert.Zero(t, perAdmitted(5, 0))
	assert.Equal(t, "25.0x", ratioText(25))
	assert.Equal(t, "0.900x", ratioText(0.9))
	assert.Equal(t, "0.00029x", ratioText(0.00029))
	assert.Equal(t, "0.000x", ratioText(0))
	assert.Equal(t, "hour", windowText(3600))
	assert.Equal(t, "1m0s", windowText(60))
}

// TestLeasePoliciesAndSubjects: the phase's policies are accepted with
// their lease (the nearly spent one chargeable down to a few units), and
// its subjects are distinct digests of the other phases' length.
func TestLeasePoliciesAndSubjects(t *testing.T) {
	hot, nearly, err := leasePolicies()
	require.NoError(t, err)
	for _, p := range []struct {
		id    string
		limit int64
	}{{string(hot.ID()), hot.Limit()}, {string(nearly.ID()), nearly.Limit()}} {
		assert.Len(t, p.id, 2)
		assert.Positive(t, p.limit)
	}
	lh, ok := hot.Lease()
	require.True(t, ok)
	assert.Equal(t, leaseMaxShare, lh.MaxShare)
	assert.Equal(t, leaseTTL, lh.TTL)
	_, ok = nearly.Lease()
	assert.True(t, ok)
	assert.Equal(t, int64(1), hot.MaxCost())
	assert.GreaterOrEqual(t, nearly.MaxCost(), int64(leaseNearlyLimit)-leaseNearlyRemaining(ModeSmoke))
	assert.Less(t, leaseNearlyRemaining(ModeSmoke), leaseNearlyRemaining(ModeFull))

	seen := map[string]bool{}
	for i := -1; i < 100; i++ {
		s := string(leaseSubject(i))
		assert.Len(t, s, 43)
		assert.False(t, seen[s], "subject %d repeats", i)
		seen[s] = true
	}
}

// TestMergeLease: a lease phase run alone goes into the results.json of a
// full run and the document's targets and lease sections, nothing else;
// a results.json of another mode or none at all is refused.
func TestMergeLease(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	base, err := ReadResults(filepath.Join(root, "bench", ResultsFile))
	require.NoError(t, err)
	ph := syntheticLease(2)
	ph.Settings.Mode = base.Mode
	check := *base
	check.Lease = ph
	check.Recompute()
	if err := Validate(&check); err != nil {
		t.Skipf("the committed bench/results.json does not validate under the current rules (make bench rewrites it): %v", err)
	}
	dir := t.TempDir()
	data, err := json.Marshal(base)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, ResultsFile), data, 0o644))
	docIn := filepath.Join(root, "docs", "performance.md")
	docOut := filepath.Join(dir, "performance.md")
	src, err := os.ReadFile(docIn)
	require.NoError(t, err)

	res, err := MergeLease(ph, Outputs{Dir: dir, DocIn: docIn, DocOut: docOut})
	require.NoError(t, err)
	back, err := ReadResults(filepath.Join(dir, ResultsFile))
	require.NoError(t, err)
	require.NotNil(t, back.Lease)
	assert.Len(t, back.Lease.Runs, len(ph.Runs))
	assert.Len(t, back.Runs, len(base.Runs), "the other phases are kept")
	assert.Len(t, back.Targets, len(res.Targets))
	doc, err := os.ReadFile(docOut)
	require.NoError(t, err)
	for _, name := range docSections {
		was, _ := SectionBody(src, name)
		now, ok := SectionBody(doc, name)
		require.True(t, ok, name)
		switch name {
		case "lease":
			assert.Equal(t, strings.TrimSpace(RenderLease(ph)), now)
		case "targets":
			assert.Contains(t, now, "Issue 37: nearly spent budget, leased p99 vs unleased")
		default:
			assert.Equal(t, was, now, "section %s is left as it is", name)
		}
	}

	ph.Settings.Mode = ModeSmoke
	_, err = MergeLease(ph, Outputs{Dir: dir, DocIn: docIn, DocOut: docOut})
	assert.ErrorContains(t, err, "smoke mode")
	_, err = MergeLease(ph, Outputs{Dir: t.TempDir(), DocIn: docIn, DocOut: docOut})
	assert.ErrorContains(t, err, "make bench-lease adds its phase")
}
