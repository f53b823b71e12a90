package router_test

import (
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/router"
	"github.com/switchboard-mcp/switchboard/router/port"
	"github.com/switchboard-mcp/switchboard/router/routertest"
)

// bytesBudget is testConfig with a pending budget of 4 MB and no count bound
// to speak of.
var bytesBudget = strings.Replace(testConfig, "router:\n  max_pending: 3\n", "router:\n  max_pending: 100\n  max_pending_bytes: 4000000\n  max_pending_bytes_per_tenant: 4000000\n", 1)

// With Go's collector letting the heap grow to twice what is live (its goal
// at GOGC=100), each pending byte costs two, and the budget counts that: of
// eight 900 KB intents three are admitted (2.7 MB held, 5.4 MB of cost
// crossing the 4 MB budget), not five; the rest wait in Kafka until pending
// intents resolve.
func TestPendingCostCountsTheHeapsGrowth(t *testing.T) {
	t.Cleanup(router.SetGateHeap(func() (live, goal, limit int64) { return 100 << 20, 200 << 20, math.MaxInt64 }))
	h := start(t, bytesBudget, "at_least_once")
	h.src.HoldPaused()
	reqTP := port.TopicPartition{Topic: requests}
	for i := 1; i <= 8; i++ {
		h.request(fmt.Sprintf("g-%d", i), "echo", large)
	}
	if err := h.src.WaitUntil(h.ctx, func(s *routertest.Source) bool { return s.Paused(reqTP) && s.Pending() == 5 }); err != nil {
		t.Fatalf("want three admitted and five in Kafka at twice their bytes: %d in Kafka, paused %v", h.src.Pending(), h.src.Paused(reqTP))
	}
	for n := 1; n <= 3; n++ {
		h.wait(echoTopic, n)
	}
	for _, id := range []string{"g-1", "g-2", "g-3"} {
		h.answer(id, "echo", `{}`)
	}
	h.wait(results, 3)
	h.advance(5 * time.Millisecond) // nothing pending: three more fit
	for n := 4; n <= 6; n++ {
		h.wait(echoTopic, n)
	}
	if err := h.src.WaitUntil(h.ctx, func(s *routertest.Source) bool { return s.Paused(reqTP) && s.Pending() == 2 }); err != nil {
		t.Fatalf("want three more admitted and two in Kafka: %d in Kafka, paused %v", h.src.Pending(), h.src.Paused(reqTP))
	}
}

// When Go's live heap nears the soft memory limit (90% of it), the requests
// partitions pause whatever the pending budget says, so that the collector
// is never left to work against a heap at its limit; responses keep flowing
// and resolve what is pending, and intake resumes once the heap is down.
func TestRequestsPauseBeforeTheMemoryLimit(t *testing.T) {
	var live atomic.Int64
	live.Store(50 << 20)
	t.Cleanup(router.SetGateHeap(func() (int64, int64, int64) { return live.Load(), live.Load(), 100 << 20 }))
	h := start(t, bytesBudget, "at_least_once")
	h.src.HoldPaused()
	reqTP := port.TopicPartition{Topic: requests}
	h.request("m-0", "echo", `{}`)
	h.request("m-1", "echo", `{}`)
	h.wait(echoTopic, 2)

	live.Store(90 << 20)
	if err := h.src.WaitUntil(h.ctx, func(s *routertest.Source) bool { return s.Paused(reqTP) }); err != nil {
		t.Fatal("requests not paused with the live heap at 90% of the memory limit")
	}
	h.request("m-2", "echo", `{}`)
	h.request("m-3", "echo", `{}`)
	h.answer("m-1", "echo", `{}`)
	h.wait(results, 1) // responses flow while requests wait
	if !h.src.Paused(reqTP) || h.sink.Count(echoTopic) != 2 {
		t.Fatalf("requests read with the heap at its bound: paused %v, %d dispatched", h.src.Paused(reqTP), h.sink.Count(echoTopic))
	}

	live.Store(60 << 20)
	h.wait(echoTopic, 4)

	// With nothing pending, a heap held by something else (the result
	// store, say) does not keep intake paused: pausing frees nothing then.
	for _, id := range []string{"m-0", "m-2", "m-3"} {
		h.answer(id, "echo", `{}`)
	}
	h.wait(results, 4)
	live.Store(95 << 20)
	h.advance(5 * time.Millisecond) // the loop publishes its pending bytes on its tick
	h.request("m-4", "echo", `{}`)
	h.wait(echoTopic, 5)
}

// When the process's resident set reaches 90% of its memory budget
// (WithProcessMemory) while intents are pending, the requests partitions
// pause whatever Go's heap says: librdkafka's copies and the C allocator's
// kept buffers are memory too. Responses keep flowing; intake resumes below
// 81%, or once nothing is pending, since pausing then frees nothing.
func TestRequestsPauseWhenTheResidentSetNearsTheProcessBudget(t *testing.T) {
	var rss atomic.Int64
	rss.Store(50 << 20)
	t.Cleanup(router.SetGateRSS(rss.Load))
	h := start(t, bytesBudget, "at_least_once", router.WithProcessMemory(100<<20))
	h.src.HoldPaused()
	reqTP := port.TopicPartition{Topic: requests}
	h.request("r-1", "echo", `{}`)
	h.request("r-2", "echo", `{}`)
	h.wait(echoTopic, 2)

	rss.Store(90 << 20)
	h.advance(5 * time.Millisecond) // the gate reads the resident set at most every 5 ms
	if err := h.src.WaitUntil(h.ctx, func(s *routertest.Source) bool { return s.Paused(reqTP) }); err != nil {
		t.Fatal("requests not paused with the resident set at 90% of the process budget")
	}
	h.request("r-3", "echo", `{}`)
	h.request("r-4", "echo", `{}`)
	h.answer("r-1", "echo", `{}`)
	h.wait(results, 1) // responses flow while requests wait
	if !h.src.Paused(reqTP) || h.sink.Count(echoTopic) != 2 {
		t.Fatalf("requests read with the resident set at its bound: paused %v, %d dispatched", h.src.Paused(reqTP), h.sink.Count(echoTopic))
	}

	rss.Store(80 << 20) // below 81%
	h.advance(5 * time.Millisecond)
	h.wait(echoTopic, 4)

	rss.Store(95 << 20)
	h.advance(5 * time.Millisecond)
	if err := h.src.WaitUntil(h.ctx, func(s *routertest.Source) bool { return s.Paused(reqTP) }); err != nil {
		t.Fatal("requests not paused again with the resident set at 95% of the process budget")
	}
	h.request("r-5", "echo", `{}`)
	for _, id := range []string{"r-2", "r-3", "r-4"} {
		h.answer(id, "echo", `{}`)
	}
	h.wait(results, 4)
	h.advance(5 * time.Millisecond) // the loop publishes its pending bytes on its tick
	h.wait(echoTopic, 5)            // nothing pending: intake resumes, whatever the resident set
}
