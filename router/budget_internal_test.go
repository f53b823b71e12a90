package router

import (
	"math"
	"runtime"
	"testing"
)

// The byte gate pauses at the bound, counting what is on its way, and
// resumes below 90% of it, not at the bound (no flapping on one intent).
func TestByteGateArithmetic(t *testing.T) {
	g := byteGate{max: 1000}
	for _, step := range []struct {
		pending, onTheirWay int64
		full                bool
	}{
		{0, 0, false},
		{999, 0, false},
		{900, 100, true},
		{950, 0, true},
		{900, 0, true},
		{899, 0, false},
		{999, 0, false},
		{1000, 500, true},
		{0, 899, false},
	} {
		if got := g.update(step.pending, step.onTheirWay); got != step.full {
			t.Fatalf("pending %d + %d on their way: full %v, want %v", step.pending, step.onTheirWay, got, step.full)
		}
	}
	off := byteGate{}
	if off.update(1<<40, 0) {
		t.Fatal("no bound (0) paused")
	}
}

// What the pending intents cost is their bytes times the collector's growth
// factor (its goal over the live heap), between 1 and 1 + GOGC/100.
func TestPendingCostCountsTheCollectorsGrowth(t *testing.T) {
	defer func(old func() heapStats) { gateHeap = old }(gateHeap)
	for _, c := range []struct {
		name  string
		heap  heapStats
		want  float64
		full  bool // 500 pending + 100 on their way, budget 1000
		cost  int64
		limit int64
	}{
		{"limit far: the heap doubles", heapStats{live: 100 << 20, goal: 200 << 20, limit: math.MaxInt64, gogc: 100}, 2, true, 1200, math.MaxInt64},
		{"limit near: the goal is lowered", heapStats{live: 100 << 20, goal: 120 << 20, limit: math.MaxInt64, gogc: 100}, 1.2, false, 720, math.MaxInt64},
		{"before the first collection", heapStats{gogc: 100, limit: math.MaxInt64}, 2, true, 1200, math.MaxInt64},
		{"a small heap's minimum goal", heapStats{live: 1 << 20, goal: 4 << 20, limit: math.MaxInt64, gogc: 100}, 2, true, 1200, math.MaxInt64},
		{"GOGC=50", heapStats{live: 100 << 20, goal: 150 << 20, limit: math.MaxInt64, gogc: 50}, 1.5, false, 900, math.MaxInt64},
		{"GOGC=off: the limit alone", heapStats{live: 100 << 20, goal: 400 << 20, limit: 400 << 20, gogc: -1}, 1, false, 600, 400 << 20},
	} {
		if got := c.heap.growth(); got != c.want {
			t.Errorf("%s: growth %v, want %v", c.name, got, c.want)
		}
		gateHeap = func() heapStats { return c.heap }
		g := byteGate{max: 1000}
		if got := g.update(500, 100); got != c.full || g.cost != c.cost || g.limit != c.limit {
			t.Errorf("%s: full %v cost %d limit %d, want %v %d %d", c.name, got, g.cost, g.limit, c.full, c.cost, c.limit)
		}
	}
}

// The gate closes when the live heap and what is on its way reach 90% of
// Go's soft memory limit, whatever the budget says, and opens below 81%.
func TestByteGateClosesBeforeTheMemoryLimit(t *testing.T) {
	defer func(old func() heapStats) { gateHeap = old }(gateHeap)
	var live int64
	gateHeap = func() heapStats { return heapStats{live: live, goal: 1000, limit: 1000, gogc: 100} }
	g := byteGate{max: 1 << 40}
	for _, step := range []struct {
		live, onTheirWay int64
		full             bool
	}{
		{500, 0, false},
		{899, 0, false},
		{850, 50, true},
		{850, 0, true},
		{810, 0, true},
		{809, 0, false},
		{1200, 0, true},
		{700, 100, false},
	} {
		live = step.live
		if got := g.update(0, step.onTheirWay); got != step.full {
			t.Fatalf("live %d + %d on their way: full %v, want %v", step.live, step.onTheirWay, got, step.full)
		}
	}
	gateHeap = func() heapStats { return heapStats{live: 1 << 40, goal: 1 << 41, limit: math.MaxInt64, gogc: 100} }
	if (&byteGate{}).update(0, 0) {
		t.Fatal("no budget and no memory limit paused")
	}
}

// readHeap reads the runtime's figures: a live heap after a collection, a
// goal above it, GOGC and the limit as the test binary runs (100, none).
func TestReadHeapReadsTheCollector(t *testing.T) {
	runtime.GC()
	h := readHeap()
	if h.live <= 0 || h.goal < h.live || h.gogc != 100 || h.limit != math.MaxInt64 {
		t.Fatalf("readHeap %+v: want live > 0, goal >= live, GOGC 100, no limit", h)
	}
}
