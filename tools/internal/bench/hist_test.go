package bench

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestHistogramIndexBounds(t *testing.T) {
	// Every value lands in a bucket whose bounds contain it, and bucket
	// order follows value order.
	prev := -1
	for _, v := range []uint64{0, 1, 127, 128, 129, 255, 256, 1000, 12345, 1 << 20, 1<<30 + 7, 1<<histMaxBits - 1} {
		i := histIndex(v)
		require.Less(t, i, histBuckets, "value %d", v)
		require.Greater(t, i, prev, "value %d", v)
		lo, w := histBounds(i)
		assert.LessOrEqual(t, lo, v, "value %d", v)
		assert.Less(t, v, lo+w, "value %d", v)
		if v >= histSubCount {
			assert.LessOrEqual(t, float64(w)/float64(lo), 1.0/histSubCount, "relative width at %d", v)
		}
		prev = i
	}
}

func TestHistogramQuantilesMatchSortedSamples(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var h Histogram
	samples := make([]time.Duration, 20_000)
	for i := range samples {
		// Log-uniform from 1 µs to 10 ms, like request latencies.
		d := time.Duration(1000 * math.Pow(2, rng.Float64()*13))
		samples[i] = d
		h.Record(d)
	}
	slices.Sort(samples)
	for _, q := range []float64{0.5, 0.9, 0.99, 0.999} {
		want := samples[int(q*float64(len(samples)))-1]
		got := h.Quantile(q)
		assert.InEpsilon(t, float64(want), float64(got), 0.01, "q=%v", q)
	}
	assert.Equal(t, uint64(len(samples)), h.Count())
	assert.Equal(t, samples[len(samples)-1], h.Max())
}

func TestHistogramMergeEdges(t *testing.T) {
	var a, b, empty Histogram
	assert.Zero(t, empty.Quantile(0.5))
	a.Record(5 * time.Microsecond)
	b.Record(-time.Second)    // clamped to 0
	b.Record(100 * time.Hour) // clamped to the top
	a.Merge(&b)
	assert.Equal(t, uint64(3), a.Count())
	assert.Zero(t, a.Quantile(0))
	assert.Equal(t, time.Duration(1<<histMaxBits-1), a.Max())
	assert.Equal(t, a.Max(), a.Quantile(1))
	assert.InEpsilon(t, float64(5*time.Microsecond), float64(a.Quantile(0.5)), 0.01)
}
