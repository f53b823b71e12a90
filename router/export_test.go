package router

import (
	"math"
	"time"
)

// SetMaxTxBytes sets the byte bound of an exactly_once transaction, before a
// router starts, and returns what restores it.
func SetMaxTxBytes(n int64) (restore func()) {
	old := maxTxBytes
	maxTxBytes = n
	return func() { maxTxBytes = old }
}

// Router tests run the byte gate on stated collector figures, not on the
// test binary's heap: by default a growth factor of 1 and no memory limit,
// so that a test's byte arithmetic is the budget's alone.
func init() {
	gateHeap = func() heapStats { return neutralHeap }
	gateRelease = func() {}                           // a whole collection each time: not what router tests test
	heapNow = func() time.Time { return time.Time{} } // read the stated figures at every update
}

// neutralHeap is the collector as router tests see it by default.
var neutralHeap = heapStats{live: 1, goal: 1, limit: math.MaxInt64, gogc: 100}

// SetGateHeap makes the byte gate read the collector's live heap, goal and
// soft limit from read (GOGC 100), before a router starts, and returns what
// restores the default.
func SetGateHeap(read func() (live, goal, limit int64)) (restore func()) {
	gateHeap = func() heapStats {
		l, g, m := read()
		return heapStats{live: l, goal: g, limit: m, gogc: 100}
	}
	return func() { gateHeap = func() heapStats { return neutralHeap } }
}

// SetGateRSS makes the byte gate read the process's resident set from read,
// before a router starts, and returns what restores the default.
func SetGateRSS(read func() int64) (restore func()) {
	old := gateRSS
	gateRSS = func() (int64, bool) { return read(), true }
	return func() { gateRSS = old }
}
