package bench

import (
	"math"
	"math/bits"
)

// histogram is a log-linear histogram of non-negative integers (the bench
// records milliseconds from record timestamps and microseconds from its own
// clock): values up to 2^(histSubBits+1)-1 = 2,047 have a bucket each, larger
// ones share a bucket with the values of the same top histSubBits+1 bits, so
// a reported value is within 0.1 % of the recorded one (and below it, never
// above). Values above histMax are counted as histMax.
//
// A histogram is not safe for concurrent use; the zero value is empty.
type histogram struct {
	counts   []uint64
	n        uint64
	sum      float64
	min, max int64
}

const (
	histSubBits  = 10
	histSubCount = 1 << histSubBits
	histMax      = 1<<36 - 1 // 19 hours in µs
)

// histIndex is the bucket of v (0 <= v <= histMax).
func histIndex(v int64) int {
	if v < 2*histSubCount {
		return int(v)
	}
	shift := bits.Len64(uint64(v)) - (histSubBits + 1)
	return shift*histSubCount + int(v>>shift)
}

// histLow is the lowest value that falls in bucket i.
func histLow(i int) int64 {
	if i < 2*histSubCount {
		return int64(i)
	}
	shift := i/histSubCount - 1
	return int64(i-shift*histSubCount) << shift
}

func (h *histogram) record(v int64) {
	v = min(max(v, 0), histMax)
	i := histIndex(v)
	if i >= len(h.counts) {
		grown := make([]uint64, max(i+1, 2*len(h.counts), 4*histSubCount))
		copy(grown, h.counts)
		h.counts = grown
	}
	h.counts[i]++
	if h.n == 0 || v < h.min {
		h.min = v
	}
	if v > h.max {
		h.max = v
	}
	h.n++
	h.sum += float64(v)
}

func (h *histogram) count() uint64 { return h.n }

func (h *histogram) mean() float64 {
	if h.n == 0 {
		return 0
	}
	return h.sum / float64(h.n)
}

// quantile returns the nearest-rank q-quantile (0 < q <= 1): the smallest
// recorded value that at least q of the values do not exceed, as the lowest
// value of its bucket (clamped to the recorded min and max). 0 when empty.
func (h *histogram) quantile(q float64) int64 {
	if h.n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q*float64(h.n) - 1e-9))
	rank = min(max(rank, 1), h.n)
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			return min(max(histLow(i), h.min), h.max)
		}
	}
	return h.max
}

// merge adds o's values to h.
func (h *histogram) merge(o *histogram) {
	if o.n == 0 {
		return
	}
	if len(h.counts) < len(o.counts) {
		grown := make([]uint64, len(o.counts))
		copy(grown, h.counts)
		h.counts = grown
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	if h.n == 0 || o.min < h.min {
		h.min = o.min
	}
	h.max = max(h.max, o.max)
	h.n += o.n
	h.sum += o.sum
}
