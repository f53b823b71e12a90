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
// answered meanwhile writes its result, then its resolution marker, and no
// pending state (three records besides its dispatch become two), and its
// request's offset is stored only once the result and the marker are both
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
	h.settle()
	if n := h.sink.Count(pendingT); n != 0 {
		t.Fatalf("%d changelog records with the result unacknowledged, want 0 (no state; the marker waits for the result)", n)
	}
	if got := h.src.Stored(reqTP); got != -1 {
		t.Fatalf("requests offset %d stored before the result was acknowledged", got)
	}
	h.ackResultHoldMarker()
	h.waitMarker("e-1")
	h.settle()
	if got := h.src.Stored(reqTP); got != -1 {
		t.Fatalf("requests offset %d stored before the marker was acknowledged", got)
	}
	h.sink.Release()
	want := h.offset[requests] // the request and settle's markers behind it
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

// ackResultHoldMarker lets the held acknowledgements through (a result's
// among them) and holds the next ones again, from the first output they
// cause on (the result's resolution marker): the loop is stopped in that
// output's Produce while the hold is set again.
func (h *harness) ackResultHoldMarker() {
	h.t.Helper()
	waiting := h.sink.Block()
	h.sink.Release()
	select {
	case <-waiting:
	case <-h.ctx.Done():
		h.t.Fatal("nothing was produced once the held acknowledgements went through")
	}
	h.sink.Hold()
	h.sink.Unblock()
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
// owner reads the requests again and dispatches them; one whose result and
// then resolution marker were written (the marker's acknowledgement still
// outstanding, so its request's offset too) is a duplicate there, not
// dispatched or resolved again: the dedup window holds across the takeover
// though no state of it was ever written. The dead instance is not stopped (a stop writes the waiting
// states): the next one restores from its changelog as it is.
func TestAtLeastOnceTakeOverMidDeferral(t *testing.T) {
	a := start(t, testConfig, config.AtLeastOnce)
	reqTP := port.TopicPartition{Topic: requests}
	a.request("w-1", "echo", `{}`) // still pending at the crash
	a.request("r-1", "echo", `{}`) // resolved, its marker's acknowledgement outstanding
	a.wait(echoTopic, 2)
	a.sink.Hold()
	t.Cleanup(a.sink.Release) // before a's own cleanup stops it (and waits for its acknowledgements)
	a.answer("r-1", "echo", `{"n":1}`)
	a.result(1)
	a.settle()
	a.ackResultHoldMarker()
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

// A lost assignment while an intent's state waits drops the state with the
// intent: this instance no longer owns it and never writes it (another
// member may own the partition already; a planned revocation writes it
// instead: TestAtLeastOnceRevokeWritesWaitingStates), and the request's
// offset is not stored past it, so the partition's next owner reads the
// request again. When the partition comes back and the request is read
// again, the new intent's state is written as any other's; the dropped
// one's, still in the deferred queue, is not.
func TestAtLeastOnceLostMidDeferral(t *testing.T) {
	h := start(t, testConfig, config.AtLeastOnce)
	reqTP := port.TopicPartition{Topic: requests}
	h.request("v-1", "echo", `{"n":1}`)
	h.wait(echoTopic, 1)
	h.src.LoseAssignment()
	h.src.Push(port.Revoked{{Topic: requests}, {Topic: responses}})
	h.settleRevoked()
	if got := h.src.Stored(reqTP); got != -1 {
		t.Fatalf("requests offset %d stored at the revoke, want none (the intent's state was never written)", got)
	}

	h.src.Push(port.Assigned{{Topic: requests}, {Topic: responses}})
	h.request("v-1", "echo", `{"n":2}`) // read again
	h.wait(echoTopic, 2)
	h.advance(5 * time.Millisecond) // commit_interval 2ms: both states' time comes
	h.waitState(nil, "v-1")
	h.settle()
	outs := h.sink.Outputs(pendingT)
	if len(outs) != 1 {
		t.Fatalf("%d changelog records, want 1 (the intent read again; the revoked one's state is never written)", len(outs))
	}
	var pi schemas.PendingIntent
	if err := h.codec.Decode(outs[0].Value, &pi); err != nil || string(pi.Payload) != `{"n":2}` {
		t.Fatalf("the state written is %s (%v), want the intent read again", pi.Payload, err)
	}
	want := h.offset[requests]
	if err := h.src.WaitUntil(h.ctx, func(s *routertest.Source) bool { return s.Stored(reqTP) == want }); err != nil {
		t.Fatalf("requests offset %d once the new intent's state was written, want %d", h.src.Stored(reqTP), want)
	}
}
