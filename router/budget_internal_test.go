package router

import (
	"math"
	"os"
	"runtime"
	"testing"
	"time"
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
		if got := g.update(step.pending, step.onTheirWay, 0, time.Time{}); got != step.full {
			t.Fatalf("pending %d + %d on their way: full %v, want %v", step.pending, step.onTheirWay, got, step.full)
		}
	}
	off := byteGate{}
	if off.update(1<<40, 0, 0, time.Time{}) {
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
		if got := g.update(500, 100, 0, time.Time{}); got != c.full || g.cost != c.cost || g.limit != c.limit {
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
		if got := g.update(1, step.onTheirWay, 0, time.Time{}); got != step.full {
			t.Fatalf("live %d + %d on their way: full %v, want %v", step.live, step.onTheirWay, got, step.full)
		}
	}
	if g.update(0, 0, 0, time.Time{}) {
		t.Fatal("the heap held the gate with nothing pending: pausing frees nothing then")
	}
	gateHeap = func() heapStats { return heapStats{live: 1 << 40, goal: 1 << 41, limit: math.MaxInt64, gogc: 100} }
	if (&byteGate{}).update(1, 0, 0, time.Time{}) {
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

// The heap gate counts the records the loop has taken since the last
// collection: the collector finds them live only at the next one, and
// until then the live heap it reports is short by their bytes.
func TestByteGateCountsWhatWasTakenSinceTheLastCollection(t *testing.T) {
	defer func(old func() heapStats) { gateHeap = old }(gateHeap)
	h := heapStats{live: 500, goal: 1000, limit: 1000, gogc: 100, cycles: 7}
	gateHeap = func() heapStats { return h }
	g := byteGate{}
	if g.update(1, 0, 10_000, time.Time{}) {
		t.Fatal("closed on the bytes taken before the first collection seen")
	}
	for _, step := range []struct {
		taken int64
		full  bool
	}{
		{10_300, false}, // 500 live + 300 taken since: 800
		{10_400, true},  // 900: 90% of the limit
	} {
		if got := g.update(1, 0, step.taken, time.Time{}); got != step.full || g.live != 500+step.taken-10_000 {
			t.Fatalf("live 500 and %d taken since the collection: full %v live %d, want %v %d", step.taken-10_000, got, g.live, step.full, 500+step.taken-10_000)
		}
	}
	h.cycles, h.live = 8, 850 // the collection found them live
	if !g.update(1, 0, 10_400, time.Time{}) || g.live != 850 {
		t.Fatalf("after a collection: live %d, want 850 and still closed (above 81%%)", g.live)
	}
	h.cycles, h.live = 9, 600
	if g.update(1, 0, 10_400, time.Time{}) {
		t.Fatalf("live 600 after the next collection: still closed (live %d)", g.live)
	}
}

// The gate closes when the process's resident set reaches 90% of its
// memory budget while intents are pending, and opens below 81% of it, or
// once nothing is pending (pausing intake frees nothing then). The resident
// set is read at most every rssEvery; while it holds the gate closed, memory
// is given back at most every releaseEvery, and read again after.
func TestByteGateClosesOnTheResidentSet(t *testing.T) {
	defer func(old func() heapStats, oldRSS func() (int64, bool), oldRelease func()) {
		gateHeap, gateRSS, gateRelease = old, oldRSS, oldRelease
	}(gateHeap, gateRSS, gateRelease)
	released := 0
	gateRelease = func() { released++ }
	gateHeap = func() heapStats { return heapStats{live: 1, goal: 2, limit: math.MaxInt64, gogc: 100} }
	var rss int64
	reads := 0
	gateRSS = func() (int64, bool) { reads++; return rss, true }
	g := byteGate{max: 1 << 40, process: 1000}
	now := time.Unix(1, 0)
	for i, step := range []struct {
		rss, pending int64
		full         bool
	}{
		{500, 10, false},
		{899, 10, false},
		{900, 10, true},
		{850, 10, true},
		{810, 10, true},
		{809, 10, false},
		{1200, 10, true},
		{1200, 0, false}, // nothing pending: nothing to wait for
		{1200, 10, true},
		{100, 10, false},
	} {
		rss = step.rss
		now = now.Add(rssEvery)
		if got := g.update(step.pending, 0, 0, now); got != step.full || g.rss != step.rss {
			t.Fatalf("step %d: resident %d with %d pending: full %v (read %d), want %v", i, step.rss, step.pending, got, g.rss, step.full)
		}
	}
	if released != 1 {
		t.Fatalf("memory given back %d times within a second of the resident set holding the gate, want once", released)
	}
	rss = 5000
	if g.update(10, 0, 0, now.Add(rssEvery-time.Nanosecond)) || reads != 10 {
		t.Fatalf("read the resident set again within rssEvery: %d reads, rss %d", reads, g.rss)
	}
	if !g.update(10, 0, 0, now.Add(rssEvery)) || reads != 11 || released != 1 {
		t.Fatalf("not read again after rssEvery (%d reads), or memory given back twice within a second (%d)", reads, released)
	}
	later := now.Add(releaseEvery)
	if !g.update(10, 0, 0, later) || reads != 12 || released != 2 {
		t.Fatalf("memory not given back with the resident set holding the gate a second later: %d releases", released)
	}
	if !g.update(10, 0, 0, later) || reads != 13 || released != 2 {
		t.Fatalf("after a release: %d reads (want the resident set read again at once), %d releases (want no second within a second)", reads, released)
	}
	gateRSS = func() (int64, bool) { return 1 << 40, false }
	if (&byteGate{process: 1000}).update(10, 0, 0, now) {
		t.Fatal("closed on a resident set that could not be read")
	}
	if (&byteGate{}).update(10, 0, 0, now) {
		t.Fatal("closed on the resident set with no process budget")
	}
}

// readRSS reads this process's resident set: more than nothing, less than
// what the machine has; statmResident parses statm's second field.
func TestReadRSSReadsTheResidentSet(t *testing.T) {
	if _, err := os.Stat("/proc/self/statm"); err != nil {
		t.Skip("no /proc/self/statm (not Linux)")
	}
	got, ok := readRSS()
	if !ok || got < 1<<20 || got > 1<<40 {
		t.Fatalf("readRSS %d %v: want a resident set of a test binary", got, ok)
	}
	for in, want := range map[string]int64{"123 456 7 8 0 9 0\n": 456, "1 2\n": 2} {
		if p, ok := statmResident([]byte(in)); !ok || p != want {
			t.Errorf("statmResident(%q) = %d %v, want %d", in, p, ok, want)
		}
	}
	for _, in := range []string{"", "123", "123 ", "123 45x 6"} {
		if _, ok := statmResident([]byte(in)); ok {
			t.Errorf("statmResident(%q) ok", in)
		}
	}
}

// The gate reads the collector's figures at most every heapEvery by the
// real clock (heapNow), not once per record: between reads it uses the
// last ones, and a reading of the clock that went back reads again.
func TestByteGateReadsTheHeapAtMostEveryHeapEvery(t *testing.T) {
	defer func(old func() heapStats, oldNow func() time.Time) { gateHeap, heapNow = old, oldNow }(gateHeap, heapNow)
	reads := 0
	live := int64(1)
	gateHeap = func() heapStats { reads++; return heapStats{live: live, goal: 2 * live, limit: 1000, gogc: 100} }
	now := time.Unix(1_000_000, 0)
	heapNow = func() time.Time { return now }
	g := byteGate{}
	for range 100 {
		if g.update(1, 0, 0, time.Time{}) {
			t.Fatal("closed on a live heap of 1")
		}
	}
	if reads != 1 {
		t.Fatalf("%d reads of the collector's figures for 100 updates within heapEvery, want 1", reads)
	}
	live = 950 // past 90 % of the limit: seen only at the next read
	if g.update(1, 0, 0, time.Time{}) || reads != 1 {
		t.Fatalf("read again (%d reads) before heapEvery passed", reads)
	}
	now = now.Add(heapEvery)
	if !g.update(1, 0, 0, time.Time{}) || reads != 2 || g.live != 950 {
		t.Fatalf("after heapEvery: %d reads, live %d; want 2 reads, live 950 and the gate closed", reads, g.live)
	}
	now = now.Add(-time.Second)
	live = 1
	if g.update(1, 0, 0, time.Time{}) || reads != 3 {
		t.Fatalf("the clock went back: %d reads, gate full %v; want a new read that opens it", reads, g.full)
	}
}
