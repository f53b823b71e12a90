package timeouts_test

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/timeouts"
)

var benchSizes = []int{1_000, 100_000, 1_000_000}

// heapAlloc returns the bytes of live heap objects after a full collection.
func heapAlloc() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// benchDeadlines returns deadlines spread over a minute, like intent timeouts.
func benchDeadlines(rng *rand.Rand, n int) []int64 {
	d := make([]int64, n)
	for i := range d {
		d[i] = start + 1 + rng.Int64N(60_000)
	}
	return d
}

// BenchmarkWheelScheduleCancel measures one Schedule and one Cancel with N
// timers pending, and reports the heap cost of the N pending timers.
func BenchmarkWheelScheduleCancel(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("pending=%d", n), func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, 2))
			fill, deadlines := benchDeadlines(rng, n), benchDeadlines(rng, 4096)
			before := heapAlloc()
			w, err := timeouts.NewWheel[uint64](time.Millisecond, start)
			if err != nil {
				b.Fatal(err)
			}
			for i, d := range fill {
				w.Schedule(d, uint64(i))
			}
			perPending := float64(heapAlloc()-before) / float64(n)
			runtime.KeepAlive(fill) // not counted as freed in the measurement
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				w.Cancel(w.Schedule(deadlines[i&4095], uint64(i)))
			}
			b.StopTimer()
			if w.Len() != n {
				b.Fatalf("Len() = %d, want %d", w.Len(), n)
			}
			b.ReportMetric(perPending, "B/pending")
		})
	}
}

// BenchmarkAfterFuncScheduleCancel is the baseline: one runtime timer per
// intent, time.AfterFunc and Stop, with N timers pending.
func BenchmarkAfterFuncScheduleCancel(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("pending=%d", n), func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, 2))
			fill, deadlines := benchDeadlines(rng, n), benchDeadlines(rng, 4096)
			timers := make([]*time.Timer, n)
			f := func() {} // one shared func: the baseline's best case
			// An hour on top, so that nothing fires during the run.
			after := func(d int64) time.Duration { return time.Hour + time.Duration(d-start)*time.Millisecond }
			before := heapAlloc()
			for i, d := range fill {
				timers[i] = time.AfterFunc(after(d), f)
			}
			perPending := float64(heapAlloc()-before) / float64(n)
			runtime.KeepAlive(fill)
			b.Cleanup(func() {
				for _, t := range timers {
					t.Stop()
				}
			})
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				time.AfterFunc(after(deadlines[i&4095]), f).Stop()
			}
			b.StopTimer()
			b.ReportMetric(perPending, "B/pending")
		})
	}
}

// BenchmarkWheelChurn is the pattern of a busy router: with N timers pending,
// each op cancels the oldest (its intent was answered) and schedules a new one.
// Unlike BenchmarkWheelScheduleCancel, the cancelled entry and its list
// neighbours are cold, so at 1M this measures cache misses.
func BenchmarkWheelChurn(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("pending=%d", n), func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, 2))
			deadlines := benchDeadlines(rng, n)
			w, err := timeouts.NewWheel[uint64](time.Millisecond, start)
			if err != nil {
				b.Fatal(err)
			}
			ring := make([]timeouts.Timer, n)
			for i, d := range deadlines {
				ring[i] = w.Schedule(d, uint64(i))
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				k := i % n
				w.Cancel(ring[k])
				ring[k] = w.Schedule(deadlines[k], uint64(i))
			}
		})
	}
}

// BenchmarkWheelExpire1M fires one million timers with the same deadline in
// one Advance; ns/op is the whole batch.
func BenchmarkWheelExpire1M(b *testing.B) {
	const n = 1_000_000
	w, err := timeouts.NewWheel[uint64](time.Millisecond, start)
	if err != nil {
		b.Fatal(err)
	}
	var sum uint64
	expire := func(_ int64, v uint64) { sum += v }
	deadline := start
	b.ReportAllocs()
	for range b.N {
		b.StopTimer()
		deadline += 30_000 // a 30 s timeout: scheduled at level 1, cascaded once
		for i := range n {
			w.Schedule(deadline, uint64(i))
		}
		b.StartTimer()
		if got := w.Advance(deadline, expire); got != n {
			b.Fatalf("fired %d, want %d", got, n)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/expiry")
}
