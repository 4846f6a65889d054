package bench

import (
	"math/bits"
	"time"
)

// Histogram geometry: values below 2^histSubBits ns are counted exactly;
// above, each power-of-two range is split into 2^histSubBits linear
// sub-buckets, so a quantile is off by less than 1/2^histSubBits (0.8%).
// Values beyond 2^histMaxBits ns (~18 minutes) are clamped.
const (
	histSubBits  = 7
	histSubCount = 1 << histSubBits
	histMaxBits  = 40
	histBuckets  = (histMaxBits - histSubBits + 1) * histSubCount
)

// Histogram is a fixed-size log-linear latency histogram (HDR style): its
// memory is constant (about 35 KiB) however many values it records. The
// zero value is empty and ready to use. It is not safe for concurrent use:
// give each worker its own and Merge them afterwards.
type Histogram struct {
	counts [histBuckets]uint64
	total  uint64
	max    uint64
}

// Record adds one latency.
func (h *Histogram) Record(d time.Duration) {
	v := uint64(max(d, 0))
	if v >= 1<<histMaxBits {
		v = 1<<histMaxBits - 1
	}
	h.counts[histIndex(v)]++
	h.total++
	h.max = max(h.max, v)
}

// Merge adds every value recorded in o.
func (h *Histogram) Merge(o *Histogram) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.total += o.total
	h.max = max(h.max, o.max)
}

// Count is the number of recorded values.
func (h *Histogram) Count() uint64 { return h.total }

// Max is the largest recorded value (after clamping).
func (h *Histogram) Max() time.Duration { return time.Duration(h.max) }

// Quantile returns the value at quantile q in [0, 1]: the midpoint of the
// bucket holding the ceil(q*count)-th smallest value, never above Max
// (Quantile(1) is Max exactly). It is 0 for an empty histogram.
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.total == 0 {
		return 0
	}
	if q >= 1 {
		return time.Duration(h.max)
	}
	q = max(q, 0)
	rank := uint64(q * float64(h.total))
	if float64(rank) < q*float64(h.total) || rank == 0 {
		rank++
	}
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			lo, width := histBounds(i)
			return time.Duration(min(lo+width/2, h.max))
		}
	}
	return time.Duration(h.max)
}

// histIndex maps v < 2^histMaxBits to its bucket.
func histIndex(v uint64) int {
	if v < histSubCount {
		return int(v)
	}
	shift := bits.Len64(v) - histSubBits - 1 // >= 0
	sub := v >> uint(shift)                  // in [histSubCount, 2*histSubCount)
	return (shift+1)*histSubCount + int(sub-histSubCount)
}

// histBounds returns the lowest value of bucket i and its width.
func histBounds(i int) (lo, width uint64) {
	if i < histSubCount {
		return uint64(i), 1
	}
	shift := i/histSubCount - 1
	sub := uint64(i%histSubCount + histSubCount)
	return sub << uint(shift), 1 << uint(shift)
}
