package router_test

import (
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/router/config"
	"github.com/switchboard-mcp/switchboard/router/port"
	"github.com/switchboard-mcp/switchboard/router/routertest"
)

// An intent's pending state waits (exactly_once: for the commit;
// at_least_once: one to two commit_intervals): one answered meanwhile
// writes only its resolution marker, and its request's offset is stored
// once the result and the marker are written.
func TestNoPendingStateForAnIntentAnsweredInTime(t *testing.T) {
	both(t, func(t *testing.T, delivery string) {
		h := start(t, testConfig, delivery)
		h.request("e-1", "echo", `{}`)
		h.wait(echoTopic, 1)
		h.answer("e-1", "echo", `{}`)
		h.result(1)
		h.waitMarker("e-1")
		reqTP := port.TopicPartition{Topic: requests}
		if err := h.src.WaitUntil(h.ctx, func(s *routertest.Source) bool { return s.Stored(reqTP) == 1 }); err != nil {
			t.Fatalf("the request's offset was not stored after its resolution: %v", err)
		}
		if n := h.sink.Count(pendingT); n != 1 {
			t.Fatalf("%d changelog records, want 1 (the resolution marker alone)", n)
		}
	})
}

// at_least_once writes the state of an intent still pending after its wait,
// and only then stores its request's offset.
func TestAtLeastOnceWritesTheStateOfAnIntentStillPending(t *testing.T) {
	h := start(t, testConfig, config.AtLeastOnce)
	h.request("p-1", "echo", `{}`)
	h.wait(echoTopic, 1)
	if n := h.sink.Count(pendingT); n != 0 {
		t.Fatalf("%d changelog records at the dispatch, want 0 (the state waits)", n)
	}
	h.advance(5 * time.Millisecond) // commit_interval 2ms: the state ages
	h.advance(5 * time.Millisecond) // and is written
	h.waitState(nil, "p-1")
	reqTP := port.TopicPartition{Topic: requests}
	if err := h.src.WaitUntil(h.ctx, func(s *routertest.Source) bool { return s.Stored(reqTP) == 1 }); err != nil {
		t.Fatalf("the request's offset was not stored once its state was written: %v", err)
	}
}
