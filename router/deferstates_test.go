package router_test

import (
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/router"
	"github.com/switchboard-mcp/switchboard/router/config"
	"github.com/switchboard-mcp/switchboard/router/port"
	"github.com/switchboard-mcp/switchboard/router/routertest"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// Under at_least_once an intent's pending state waits commit_interval: one
// answered meanwhile writes its result and its resolution marker and no
// pending state (three records besides its dispatch become two), and its
// request's offset is stored only once the result and the marker are
// acknowledged.
func TestAtLeastOnceWritesNoStateForAnIntentAnsweredInTime(t *testing.T) {
	h := start(t, testConfig, config.AtLeastOnce)
	reqTP := port.TopicPartition{Topic: requests}
	h.request("e-1", "echo", `{}`)
	h.wait(echoTopic, 1)
	h.sink.Hold()
	t.Cleanup(h.sink.Release) // before the harness stops the router (and waits for its acknowledgements)
	h.answer("e-1", "echo", `{}`)
	h.result(1)
	h.waitMarker("e-1")
	h.settle()
	if got := h.src.Stored(reqTP); got != -1 {
		t.Fatalf("requests offset %d stored before the result and the marker were acknowledged", got)
	}
	h.sink.Release()
	want := h.offset[requests] // the request and settle's marker behind it
	if err := h.src.WaitUntil(h.ctx, func(s *routertest.Source) bool { return s.Stored(reqTP) == want }); err != nil {
		t.Fatalf("the request's offset was not stored after its resolution: %v", err)
	}
	h.advance(5 * time.Millisecond) // past commit_interval (2ms): nothing is left to write
	h.settle()
	if n := h.sink.Count(pendingT); n != 1 {
		t.Fatalf("%d changelog records, want 1 (the resolution marker alone)", n)
	}
	if got := h.counter("switchboard_pending_states_skipped_total"); got != 1 {
		t.Fatalf("states skipped = %v, want 1", got)
	}
}

// at_least_once writes the newest state of an intent still pending
// commit_interval after its first change, and stores its request's offset
// only once that state is acknowledged.
func TestAtLeastOnceWritesTheStateOfAnIntentStillPending(t *testing.T) {
	h := start(t, testConfig, config.AtLeastOnce)
	reqTP := port.TopicPartition{Topic: requests}
	h.request("p-1", "echo", `{}`)
	h.wait(echoTopic, 1)
	h.settle()
	if n := h.sink.Count(pendingT); n != 0 {
		t.Fatalf("%d changelog records at the dispatch, want 0 (the state waits)", n)
	}
	if got := h.src.Stored(reqTP); got != -1 {
		t.Fatalf("requests offset %d stored before the intent's state was written", got)
	}
	h.advance(5 * time.Millisecond) // commit_interval 2ms: the state is written at this tick
	h.waitState(nil, "p-1")
	want := h.offset[requests] // the request and settle's marker behind it
	if err := h.src.WaitUntil(h.ctx, func(s *routertest.Source) bool { return s.Stored(reqTP) == want }); err != nil {
		t.Fatalf("the request's offset was not stored once its state was written: %v", err)
	}
	h.answer("p-1", "echo", `{}`)
	h.result(1)
	h.waitMarker("p-1")
	if n := h.sink.Count(pendingT); n != 2 {
		t.Fatalf("%d changelog records, want 2 (the state, then the marker)", n)
	}
}

// An instance that dies while its intents' states wait neither loses nor
// duplicates them: their requests' offsets were not stored, so the next
// owner reads the requests again and dispatches them; one whose resolution
// marker was written (its acknowledgement still outstanding, so its
// request's offset too) is a duplicate there, not dispatched or resolved
// again. The dead instance is not stopped (a stop writes the waiting
// states): the next one restores from its changelog as it is.
func TestAtLeastOnceTakeOverMidDeferral(t *testing.T) {
	a := start(t, testConfig, config.AtLeastOnce)
	reqTP := port.TopicPartition{Topic: requests}
	a.request("w-1", "echo", `{}`) // still pending at the crash
	a.request("r-1", "echo", `{}`) // resolved, its acknowledgements outstanding
	a.wait(echoTopic, 2)
	a.sink.Hold()
	t.Cleanup(a.sink.Release) // before a's own cleanup stops it (and waits for its acknowledgements)
	a.answer("r-1", "echo", `{"n":1}`)
	a.result(1)
	a.waitMarker("r-1")
	a.settle()
	if got := a.src.Stored(reqTP); got != -1 {
		t.Fatalf("requests offset %d stored at the crash, want none", got)
	}
	if n := a.sink.Count(pendingT); n != 1 {
		t.Fatalf("%d changelog records at the crash, want 1 (r-1's marker; w-1's state waits)", n)
	}

	// The next owner reads the requests partition from the start (nothing
	// was committed) and the responses partition from its stored offset.
	var replay []*port.Record
	for _, id := range []string{"w-1", "r-1"} {
		v, err := a.codec.Encode(requests, &schemas.IntentRequest{IntentID: id, IntentType: "echo", Payload: schemas.JSON(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		replay = append(replay, &port.Record{Topic: requests, Key: []byte(id), Value: v, TimestampMs: t0.UnixMilli()})
	}
	b := startWith(t, t0, replay, testConfig, config.AtLeastOnce, router.WithRestorer(a.changelog()))
	b.wait(echoTopic, 1)
	b.settle()
	if n := b.sink.Count(echoTopic); n != 1 {
		t.Fatalf("%d dispatches after the takeover, want 1 (w-1 only: r-1 was resolved)", n)
	}
	var ar schemas.AgentRequest
	if err := b.codec.Decode(b.wait(echoTopic, 1).Value, &ar); err != nil || ar.IntentID != "w-1" {
		t.Fatalf("dispatched %+v %v, want w-1", ar, err)
	}
	b.answer("w-1", "echo", `{"n":2}`)
	if res := b.result(1); res.IntentID != "w-1" || res.Outcome != schemas.OutcomeAnswered {
		t.Fatalf("w-1 after the takeover: %+v", res)
	}
	b.settle()
	if n := a.sink.Count(results) + b.sink.Count(results); n != 2 {
		t.Fatalf("%d results over both instances, want 2 (one per intent)", n)
	}
	if got := b.counter("switchboard_intents_duplicate_total"); got != 1 {
		t.Fatalf("duplicates = %v, want 1 (r-1's request read again)", got)
	}
}
