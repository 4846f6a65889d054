package bench

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMedian(t *testing.T) {
	assert.Zero(t, median(nil))
	assert.Equal(t, 3.0, median([]float64{5, 1, 3}))
	assert.Equal(t, 2.5, median([]float64{4, 1, 2, 3}))
	xs := []float64{3, 1, 2}
	median(xs)
	assert.Equal(t, []float64{3, 1, 2}, xs, "median must not reorder its input")
}

func TestComparePairsByRepetition(t *testing.T) {
	runs := []RunResult{
		{Limiter: "a", Concurrency: 1, Subjects: SubjectsHot, Rep: 0, OpsPerSec: 90},
		{Limiter: "b", Concurrency: 1, Subjects: SubjectsHot, Rep: 0, OpsPerSec: 100},
		{Limiter: "a", Concurrency: 1, Subjects: SubjectsHot, Rep: 1, OpsPerSec: 50}, // a drift both share
		{Limiter: "b", Concurrency: 1, Subjects: SubjectsHot, Rep: 1, OpsPerSec: 50},
		{Limiter: "a", Concurrency: 1, Subjects: SubjectsHot, Rep: 2, OpsPerSec: 80},
		{Limiter: "b", Concurrency: 1, Subjects: SubjectsHot, Rep: 2, OpsPerSec: 100},
		{Limiter: "a", Concurrency: 16, Subjects: SubjectsHot, Rep: 0, OpsPerSec: 10}, // no partner
	}
	cs := compare(runs, "x", KindRatio, "opsPerSec", "a", "b")
	require.Len(t, cs, 1)
	c := cs[0]
	assert.Equal(t, 1, c.Concurrency)
	assert.InDelta(t, 0.9, c.Median, 1e-9)
	assert.InDelta(t, 0.8, c.Min, 1e-9)
	assert.InDelta(t, 1.0, c.Max, 1e-9)
	assert.Len(t, c.Values, 3)

	d := compare(runs, "y", KindDifference, "opsPerSec", "a", "b")
	require.Len(t, d, 1)
	assert.InDelta(t, -10, d[0].Median, 1e-9)
}

func TestAggregateMedians(t *testing.T) {
	runs := []RunResult{
		{Limiter: "a", Family: "f", Concurrency: 1, Subjects: SubjectsHot, Ops: 10, OpsPerSec: 100, P99Micros: 9},
		{Limiter: "a", Family: "f", Concurrency: 1, Subjects: SubjectsHot, Ops: 10, OpsPerSec: 300, P99Micros: 1},
		{Limiter: "a", Family: "f", Concurrency: 1, Subjects: SubjectsHot, Ops: 10, OpsPerSec: 200, P99Micros: 5},
	}
	cells := aggregate(runs)
	require.Len(t, cells, 1)
	c := cells[0]
	assert.Equal(t, 3, c.Reps)
	assert.Equal(t, int64(30), c.Ops)
	assert.Equal(t, 200.0, c.OpsPerSec)
	assert.Equal(t, 100.0, c.OpsPerSecMin)
	assert.Equal(t, 300.0, c.OpsPerSecMax)
	assert.Equal(t, 5.0, c.P99Micros)
}

func TestTargetJudge(t *testing.T) {
	for _, tc := range []struct {
		op       string
		measured float64
		want     string
	}{
		{">=", 0.9, StatusMet}, {">=", 0.899, StatusMissed},
		{"<=", 4, StatusMet}, {"<=", 4.01, StatusMissed},
		{"<", 999, StatusMet}, {"<", 1000, StatusMissed},
	} {
		tg := Target{Op: tc.op, Threshold: map[string]float64{">=": 0.9, "<=": 4, "<": 1000}[tc.op], Measured: tc.measured}
		tg.judge()
		assert.Equal(t, tc.want, tg.Status, "%s %v", tc.op, tc.measured)
	}
	nm := Target{Op: "<=", Status: StatusNotMeasured}
	nm.judge()
	assert.Equal(t, StatusNotMeasured, nm.Status)
}

func TestEvaluateTargetsWithoutDataIsNotMeasured(t *testing.T) {
	ts := evaluateTargets(&Results{})
	require.Len(t, ts, 35)
	for _, tg := range ts {
		assert.Equal(t, StatusNotMeasured, tg.Status, tg.ID)
	}
	assert.Error(t, Validate(&Results{}), "an empty result must fail validation")
}

func TestRenderDocReplacesOnlyMarkedSections(t *testing.T) {
	var doc strings.Builder
	doc.WriteString("# Title\n\nHand-written prose.\n")
	for _, s := range docSections {
		doc.WriteString("\n" + beginMarker(s) + "\nstale\n" + endMarker(s) + "\n")
	}
	doc.WriteString("\nClosing prose.\n")
	res := &Results{Mode: ModeSmoke, Settings: Settings{Concurrency: []int{1}}, RedisBenchmark: RedisBenchmark{Skipped: "no binary"}}
	out, err := RenderDoc([]byte(doc.String()), res)
	require.NoError(t, err)
	s := string(out)
	assert.Contains(t, s, "Hand-written prose.")
	assert.Contains(t, s, "Closing prose.")
	assert.NotContains(t, s, "stale")
	body, ok := SectionBody(out, "redis-benchmark")
	require.True(t, ok)
	assert.Equal(t, "Skipped: no binary.", body)
	body, ok = SectionBody(out, "chart")
	require.True(t, ok)
	assert.Contains(t, body, ChartDocPath)

	again, err := RenderDoc(out, res)
	require.NoError(t, err)
	assert.Equal(t, s, string(again), "rendering is idempotent")

	_, err = RenderDoc([]byte(strings.Replace(doc.String(), endMarker("memory"), "", 1)), res)
	assert.ErrorContains(t, err, `"memory"`)
	_, err = RenderDoc([]byte(doc.String()+beginMarker("targets")), res)
	assert.ErrorContains(t, err, `"targets"`)
}

func TestRepOrderAlternatesPairs(t *testing.T) {
	for rep := range 6 {
		order := repOrder(rep)
		require.ElementsMatch(t, matrixOrder, order, "rep %d runs every limiter once", rep)
		for _, alg := range []string{"fixed_window", "sliding_window_counter", "token_bucket", "gcra"} {
			p, b := slices.Index(order, providerName(alg)), slices.Index(order, bareName(alg))
			if rep%2 == 0 {
				assert.Less(t, p, b, "rep %d: provider first", rep)
			} else {
				assert.Greater(t, p, b, "rep %d: bare first", rep)
			}
		}
	}
	assert.NotEqual(t, repOrder(0)[0], repOrder(2)[0], "the first limiter changes")
}

func TestPairedRatioAndDiff(t *testing.T) {
	a := []float64{200, 400, 210}
	b := []float64{100, 200, 100, 999} // the extra repetition has no partner
	assert.InDelta(t, 2.0, pairedRatio(a, b), 1e-9)
	assert.InDelta(t, 110, pairedDiff(a, b), 1e-9)
	assert.Zero(t, pairedRatio(nil, b))
}

// TestIssue13Targets: each issue-13 target is judged on its worst cell at
// the concurrencies it names, the token bucket on the pipelined provider
// when it was measured.
func TestIssue13Targets(t *testing.T) {
	cmp := func(name, a string, c int, subj string, v float64) Comparison {
		return Comparison{Name: name, A: a, Concurrency: c, Subjects: subj, Median: v}
	}
	tb, fw := providerName("token_bucket"), providerName("fixed_window")
	res := &Results{
		Comparisons: []Comparison{
			cmp(CmpTokenVsRedisRateOps, tb, 16, SubjectsDistinct, 0.9),
			cmp(CmpPipelinedVsRedisRate, pipelinedName, 16, SubjectsDistinct, 1.5),
			cmp(CmpPipelinedVsRedisRate, pipelinedName, 64, SubjectsHot, 1.31),
			cmp(CmpPipelinedVsRedisRate, pipelinedName, 1, SubjectsHot, 0.9), // c=1 counts only for the c=1 target
			cmp(CmpFixedVsUluleOps, fw, 16, SubjectsDistinct, 1.2),
			cmp(CmpFixedVsUluleOps, fw, 64, SubjectsHot, 1.05),
			cmp(CmpFixedVsUluleOps, fw, 1, SubjectsHot, 0.5), // not judged
			cmp(CmpServerVsRedisRateCPU, fw, 64, SubjectsDistinct, 0.8),
			cmp(CmpServerVsRedisRateCPU, tb, 64, SubjectsDistinct, 0.95),
			cmp(CmpServerVsRedisRateCPU, tb, 16, SubjectsDistinct, 3), // not judged
			cmp(CmpProviderVsBareP50, tb, 1, SubjectsHot, 1.12),
		},
		Memory: []Memory{{Limiter: fw, BytesPerSubject: 181}, {Limiter: tb, BytesPerSubject: 189}, {Limiter: FamilyRedisRate, BytesPerSubject: 300}},
	}
	got := map[string]Target{}
	for _, tg := range issue13Targets(res) {
		got[tg.ID] = tg
	}
	want := map[string]struct {
		measured float64
		status   string
	}{
		TargetTokenVsRedisRateHigh: {1.31, StatusMet},
		TargetTokenVsRedisRateC1:   {0.9, StatusMissed},
		// Issue 24 item 4 raises the c=1 bar to 1.0x: the same cell.
		TargetTokenVsRedisRateC1I24: {0.9, StatusMissed},
		TargetTokenP99VsRedisRate:   {0, StatusNotMeasured},
		TargetFixedVsUlule:          {1.05, StatusMissed},
		TargetServerCPUVsRedisRate:  {0.95, StatusMet},
		TargetMemory190:             {189, StatusMet},
		TargetP50VsBareC1:           {1.12, StatusMissed},
	}
	require.Len(t, got, len(want))
	for id, w := range want {
		assert.Equal(t, w.status, got[id].Status, id)
		assert.InDelta(t, w.measured, got[id].Measured, 1e-9, id)
	}
	assert.Contains(t, got[TargetTokenVsRedisRateHigh].Where, "pipelined provider")
	assert.Contains(t, got[TargetTokenVsRedisRateHigh].Note, "unbatched provider 0.900x")
	assert.Contains(t, got[TargetServerCPUVsRedisRate].Where, "unbatched provider")
	assert.Equal(t, "no pipelined run", got[TargetServerCPUVsRedisRate].Note)
}

// TestServerCPUTargetAtTheShippedDefault: the server CPU per decision is
// judged on the pipelined provider (the shipped default) when the run
// measured it, on the worst of its four algorithms at c=64 over both
// subject sets, with the unbatched provider's worst cell in the note.
func TestServerCPUTargetAtTheShippedDefault(t *testing.T) {
	cmp := func(name, a string, c int, subj string, v float64) Comparison {
		return Comparison{Name: name, A: a, Concurrency: c, Subjects: subj, Median: v}
	}
	judge := func(cs ...Comparison) Target {
		for _, tg := range issue13Targets(&Results{Comparisons: cs}) {
			if tg.ID == TargetServerCPUVsRedisRate {
				return tg
			}
		}
		t.Fatal("no server CPU target")
		return Target{}
	}
	unbatched := []Comparison{
		cmp(CmpServerVsRedisRateCPU, providerName("token_bucket"), 64, SubjectsHot, 1.17),
		cmp(CmpServerVsRedisRateCPU, providerName("fixed_window"), 64, SubjectsDistinct, 1.02),
	}
	pipelined := []Comparison{
		cmp(CmpPipelinedServerVsRedisRateCPU, pipelinedName, 64, SubjectsDistinct, 0.45),
		cmp(CmpPipelinedServerVsRedisRateCPU, pipelinedFixedName, 64, SubjectsHot, 0.5),
		cmp(CmpPipelinedServerVsRedisRateCPU, pipelinedSlidingName, 64, SubjectsHot, 0.62),
		cmp(CmpPipelinedServerVsRedisRateCPU, pipelinedGCRAName, 64, SubjectsDistinct, 0.48),
		cmp(CmpPipelinedServerVsRedisRateCPU, pipelinedSlidingName, 16, SubjectsHot, 2.0), // c=16: not judged
	}
	tg := judge(append(slices.Clone(unbatched), pipelined...)...)
	assert.InDelta(t, 0.62, tg.Measured, 1e-9)
	assert.Equal(t, StatusMet, tg.Status)
	assert.Contains(t, tg.Where, "pipelined provider")
	assert.Contains(t, tg.Where, pipelinedSlidingName)
	assert.Contains(t, tg.Note, "unbatched provider 1.170x")

	// One pipelined algorithm over redis_rate's CPU misses the target.
	tg = judge(append(slices.Clone(pipelined), cmp(CmpPipelinedServerVsRedisRateCPU, pipelinedGCRAName, 64, SubjectsHot, 1.04))...)
	assert.InDelta(t, 1.04, tg.Measured, 1e-9)
	assert.Equal(t, StatusMissed, tg.Status)

	// Without a pipelined run: the unbatched provider, said so.
	tg = judge(unbatched...)
	assert.InDelta(t, 1.17, tg.Measured, 1e-9)
	assert.Equal(t, StatusMissed, tg.Status)
	assert.Contains(t, tg.Where, "unbatched provider")
	assert.Equal(t, "no pipelined run", tg.Note)
}

// TestIssue22Targets: GCRA's throughput targets are judged like the
// token bucket's (worst cell, pipelined provider when measured), its
// memory against the least of the other algorithms and redis_rate (not
// ulule or the trivial script), the sliding log on its growth under abuse
// whichever its sign.
func TestIssue22Targets(t *testing.T) {
	cmp := func(name, a string, c int, subj string, v float64) Comparison {
		return Comparison{Name: name, A: a, Concurrency: c, Subjects: subj, Median: v}
	}
	res := &Results{
		Comparisons: []Comparison{
			cmp(CmpGCRAVsRedisRateOps, gcraName, 1, SubjectsHot, 1.2),
			cmp(CmpGCRAVsRedisRateOps, gcraName, 16, SubjectsDistinct, 0.9),
			cmp(CmpPipelinedGCRAVsRedisRateOps, pipelinedGCRAName, 1, SubjectsDistinct, 0.98),
			cmp(CmpPipelinedGCRAVsRedisRateOps, pipelinedGCRAName, 1, SubjectsHot, 1.1),
			cmp(CmpPipelinedGCRAVsRedisRateOps, pipelinedGCRAName, 16, SubjectsDistinct, 1.6),
			cmp(CmpPipelinedGCRAVsRedisRateOps, pipelinedGCRAName, 64, SubjectsHot, 1.35),
		},
		Memory: []Memory{
			{Limiter: providerName("fixed_window"), BytesPerSubject: 178},
			{Limiter: providerName("token_bucket"), BytesPerSubject: 180},
			{Limiter: gcraName, BytesPerSubject: 170},
			{Limiter: FamilyRedisRate, BytesPerSubject: 199},
			{Limiter: FamilyUlule, BytesPerSubject: 146}, // not a peer of this target
			{Limiter: FamilyTrivial, BytesPerSubject: 136},
		},
		MemoryAbuse: []MemoryAbuse{{Limiter: slidingLogName, Subjects: 10, Limit: 100, GrowthPercent: -1.5,
			Exact: AbuseRound{BytesPerSubject: 1000}, Abused: AbuseRound{CallsPerSubject: 1000, BytesPerSubject: 985, Denied: 9000}}},
	}
	got := map[string]Target{}
	for _, tg := range issue22Targets(res) {
		got[tg.ID] = tg
	}
	want := map[string]struct {
		measured, threshold float64
		status              string
	}{
		TargetGCRAVsRedisRateC1:   {0.98, 1.0, StatusMissed},
		TargetGCRAVsRedisRateHigh: {1.35, 1.3, StatusMet},
		TargetGCRAMemory:          {170, 177, StatusMet},
		TargetSlidingLogAbuseFlat: {1.5, 1, StatusMissed},
	}
	require.Len(t, got, len(want))
	for id, w := range want {
		assert.Equal(t, w.status, got[id].Status, id)
		assert.InDelta(t, w.measured, got[id].Measured, 1e-9, id)
		assert.InDelta(t, w.threshold, got[id].Threshold, 1e-9, id)
	}
	assert.Contains(t, got[TargetGCRAVsRedisRateHigh].Note, "unbatched provider 0.900x")
	assert.Contains(t, got[TargetGCRAMemory].Where, "fixed_window 178.0 B")

	res.Memory[2].BytesPerSubject = 177.5 // within the margin is not below
	res.MemoryAbuse[0] = MemoryAbuse{Limiter: slidingLogName, Skipped: "not accepted"}
	got = map[string]Target{}
	for _, tg := range issue22Targets(res) {
		got[tg.ID] = tg
	}
	assert.Equal(t, StatusMissed, got[TargetGCRAMemory].Status)
	assert.Equal(t, StatusNotMeasured, got[TargetSlidingLogAbuseFlat].Status)
	assert.True(t, abuseSkipped(res))
}
