package bench

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFloodSummaryAndTargets: medians per limiter, the p99 ratio paired by
// repetition, commands per denied call, and the targets judged on the
// cached provider against the peers.
func TestFloodSummaryAndTargets(t *testing.T) {
	var runs []FloodRun
	for rep, k := range []float64{1, 2, 3} {
		runs = append(runs,
			FloodRun{Limiter: FloodCached, Phase: FloodPhaseFlood, Rep: rep, Seconds: 1, Denied: 1000, DeniedPerSec: 1000 * k, RedisCommands: 2, ServerCPUPerSec: 0.01},
			FloodRun{Limiter: FloodCached, Phase: FloodPhaseWell, Rep: rep, Seconds: 1, Admitted: 10, WellP99Micros: 100 * k},
			FloodRun{Limiter: FloodCached, Phase: FloodPhaseMixed, Rep: rep, Seconds: 1, Denied: 1, Admitted: 10, WellP99Micros: 110 * k},
			FloodRun{Limiter: FamilyRedisRate, Phase: FloodPhaseFlood, Rep: rep, Seconds: 1, Denied: 50, DeniedPerSec: 50 * k, RedisCommands: 50, ServerCPUPerSec: 0.5},
			FloodRun{Limiter: FamilyUlule, Phase: FloodPhaseFlood, Rep: rep, Seconds: 1, Denied: 500, DeniedPerSec: 500 * k, RedisCommands: 500},
		)
	}
	sums := summarizeFlood(runs)
	require.Len(t, sums, 3, "the limiters that ran")
	c := sums[0]
	assert.Equal(t, FloodCached, c.Limiter)
	assert.InDelta(t, 2000, c.DeniedPerSec, 1e-9)
	assert.InDelta(t, 0.002, c.CommandsPerDenied, 1e-9)
	assert.InDelta(t, 200, c.WellP99Micros, 1e-9)
	assert.InDelta(t, 1.1, c.WellP99Ratio, 1e-9)

	chart, err := RenderFloodChart(&Results{FloodSummaries: sums})
	require.NoError(t, err)
	require.NoError(t, validatePNG(FloodChartFile, chart))
	_, err = RenderFloodChart(&Results{})
	require.Error(t, err, "no flood, no chart")

	ts := floodTargets(&Results{FloodSummaries: sums})
	want := map[string]string{TargetFloodCommands: StatusMet, TargetFloodVsRedisRate: StatusMet, TargetFloodVsUlule: StatusMissed, TargetFloodWellP99: StatusMet}
	require.Len(t, ts, len(want))
	for _, tg := range ts {
		assert.Equal(t, want[tg.ID], tg.Status, "%s measured %v", tg.ID, tg.Measured)
	}
}
