package router_test

import (
	"fmt"
	"testing"

	"github.com/switchboard-mcp/switchboard/router/port"
	"github.com/switchboard-mcp/switchboard/router/routertest"
)

// at_least_once: acknowledgements that arrive together are taken in one
// wake-up of the loop, and the offsets they advance are stored once per
// partition, not once per record (a StoreOffsets is a cgo call).
func TestAtLeastOnceStoresABurstOfAcksOnce(t *testing.T) {
	const n = 50
	h := start(t, testConfig, "at_least_once")
	h.sink.Hold()
	for i := range n { // unroutable: rejected at once, done when the result is acknowledged
		h.request(fmt.Sprintf("i-%d", i), "no-such-type", `{}`)
	}
	h.wait(results, n)
	reqTP := port.TopicPartition{Topic: requests}
	if got := h.src.Stored(reqTP); got != -1 {
		t.Fatalf("requests offset %d stored before any result was acknowledged", got)
	}
	before := h.src.StoreOffsets()
	// Hold the loop inside a record while every held acknowledgement
	// queues up, then let it go: it finds them all waiting.
	waiting := h.sink.Block()
	h.request("i-last", "no-such-type", `{}`)
	<-waiting
	h.sink.Release()
	h.sink.Unblock()
	if err := h.src.WaitUntil(h.ctx, func(s *routertest.Source) bool { return s.Stored(reqTP) == n+1 }); err != nil {
		t.Fatalf("requests offset %d, want %d: %v", h.src.Stored(reqTP), n+1, err)
	}
	// One store for the burst, and at most two for the last request's own
	// acknowledgements; one per acknowledged record would be n+1.
	if stores := h.src.StoreOffsets() - before; stores > 3 {
		t.Fatalf("%d StoreOffset calls for %d records acknowledged together, want at most 3", stores, n+1)
	}
}
