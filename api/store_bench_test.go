package api_test

import (
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/api"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// BenchmarkResultsStoreHeap adds 300 results with answers of 1 MB each to a
// store of the default capacity and byte budget, and reports the heap the
// store then holds (heap-MiB, after a GC, less the heap before). Target:
// within the byte budget (128 MiB by default) plus its bookkeeping. One op
// is the 300 results.
//
// Self-contained like BenchmarkSubmitUnderSlowBodies, to compare with an
// older tree.
func BenchmarkResultsStoreHeap(b *testing.B) {
	const n, size = 300, 1 << 20
	var held float64
	for range b.N {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		r := api.NewResults(0)
		for i := range n {
			res := &schemas.IntentResult{
				IntentID: "big-" + strconv.Itoa(i), IntentType: "echo", Agent: "a", Outcome: schemas.OutcomeAnswered,
				Answer: schemas.Ptr(schemas.JSON(`"` + strings.Repeat("x", size-2) + `"`)),
			}
			r.Add(res)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		held = float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / (1 << 20)
		runtime.KeepAlive(r)
	}
	b.ReportMetric(held, "heap-MiB")
}
