package router_test

import (
	"errors"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/router"
	"github.com/switchboard-mcp/switchboard/router/config"
	"github.com/switchboard-mcp/switchboard/router/port"
	"github.com/switchboard-mcp/switchboard/router/routertest"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// dispatchFirstConfig has an agent that takes one intent at a time (so a
// second intent waits in its queue, and is dispatched when the first is
// answered) and another agent, whose intents' states show when a tick has
// written the states that were due.
const dispatchFirstConfig = `
agents:
  one:   {max_in_flight: 1}
  other: {}
intents:
  hog: {agent: one, timeout: 2s}
  by:  {agent: other, timeout: 2s}
topics:
  partitions: 1
router:
  commit_interval: 2ms
`

const otherTopic = "mcp.agent.other.request"

// statesOf returns the changelog records written for id so far.
func (h *harness) statesOf(id string) []schemas.PendingIntent {
	h.t.Helper()
	var out []schemas.PendingIntent
	for _, o := range h.sink.Outputs(pendingT) {
		if string(o.Key) != id {
			continue
		}
		var pi schemas.PendingIntent
		if err := h.codec.Decode(o.Value, &pi); err != nil {
			h.t.Fatal(err)
		}
		out = append(out, pi)
	}
	return out
}

// Under at_least_once an intent's state that says it was dispatched is
// written only once the broker has acknowledged that dispatch, whether the
// dispatch was made for its request or when its agent's queue moved (which
// counts against no record). Written first, a crash that lost the dispatch
// left a state saying in flight: the next owner waited for an answer no
// agent was asked for (TestAtLeastOnceCrashBeforeTheDispatchIsAcknowledged).
func TestAtLeastOnceWritesAStateOnlyAfterItsDispatch(t *testing.T) {
	t.Run("for its request", func(t *testing.T) {
		h := start(t, dispatchFirstConfig, config.AtLeastOnce)
		t.Cleanup(h.sink.Release) // before the harness stops the router
		h.sink.HoldTopic(oneTopic)
		h.request("s-1", "hog", `{}`)
		h.wait(oneTopic, 1)
		h.request("b-1", "by", `{}`) // its state comes due at the same tick, after s-1's
		h.wait(otherTopic, 1)
		h.checkStateWaitsForDispatch("s-1", "b-1")
	})
	t.Run("from the queue", func(t *testing.T) {
		h := start(t, dispatchFirstConfig, config.AtLeastOnce)
		t.Cleanup(h.sink.Release)
		h.request("h-1", "hog", `{}`)
		h.wait(oneTopic, 1)
		h.request("q-1", "hog", `{}`) // queued behind h-1
		h.request("b-1", "by", `{}`)
		h.wait(otherTopic, 1)
		h.sink.HoldTopic(oneTopic)
		h.answer("h-1", "one", `{}`) // q-1 leaves the queue: dispatched with no record to count against
		h.wait(oneTopic, 2)
		h.checkStateWaitsForDispatch("q-1", "b-1")
	})
}

// checkStateWaitsForDispatch: id's dispatch is not acknowledged; at the
// tick that writes the bystander's state (made after id's), id's is not
// written, nor its request's offset stored; once the dispatch is
// acknowledged, its state (in flight) is, and then the offset.
func (h *harness) checkStateWaitsForDispatch(id, bystander string) {
	h.t.Helper()
	reqTP := port.TopicPartition{Topic: requests}
	h.advance(5 * time.Millisecond) // commit_interval 2ms: both states are due
	h.waitState(nil, bystander)
	if got := h.statesOf(id); len(got) != 0 {
		h.t.Fatalf("%s: %d changelog records before its dispatch was acknowledged (first: queued=%v dispatched_at=%d), want none",
			id, len(got), got[0].Queued, got[0].DispatchedAt)
	}
	before := h.src.Stored(reqTP)
	h.sink.ReleaseTopic(oneTopic)
	h.waitState(func(pi *schemas.PendingIntent) bool { return pi.Queued == nil && pi.DispatchedAt != 0 }, id)
	if err := h.src.WaitUntil(h.ctx, func(s *routertest.Source) bool { return s.Stored(reqTP) > before }); err != nil {
		h.t.Fatalf("the requests offset stayed at %d once %s's state was written: %v", before, id, err)
	}
}

// An instance killed while a dispatch made from its agent's queue waits for
// the broker leaves no state saying it was dispatched: the next owner reads
// its request again and dispatches it, rather than restoring it in flight
// and falling back at its deadline without any agent having seen it (seen
// in the at_least_once chaos test: "dispatched 1850ms before its deadline,
// with the broker up, and the agent never answered it").
func TestAtLeastOnceCrashBeforeTheDispatchIsAcknowledged(t *testing.T) {
	a := start(t, dispatchFirstConfig, config.AtLeastOnce)
	t.Cleanup(a.sink.Release)
	a.request("h-1", "hog", `{}`)
	a.wait(oneTopic, 1)
	a.request("q-1", "hog", `{}`)
	a.request("b-1", "by", `{}`)
	a.wait(otherTopic, 1)
	a.sink.HoldTopic(oneTopic)
	a.answer("h-1", "one", `{}`)
	a.wait(oneTopic, 2) // q-1's dispatch: lost with the instance
	a.advance(5 * time.Millisecond)
	a.waitState(nil, "b-1")
	a.waitMarker("h-1")

	// The next owner reads the requests from the first offset not stored
	// (h-1's was: its result and marker were acknowledged).
	var replay []*port.Record
	for i, id := range []string{"q-1", "b-1"} {
		typ := map[string]string{"q-1": "hog", "b-1": "by"}[id]
		v, err := a.codec.Encode(requests, &schemas.IntentRequest{IntentID: id, IntentType: typ, Payload: schemas.JSON(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		replay = append(replay, &port.Record{Topic: requests, Offset: int64(1 + i), Key: []byte(id), Value: v, TimestampMs: t0.UnixMilli()})
	}
	b := startWith(t, t0.Add(5*time.Millisecond), replay, dispatchFirstConfig, config.AtLeastOnce, router.WithRestorer(a.changelog()))
	b.settle()
	if n := b.sink.Count(oneTopic); n != 1 {
		t.Fatalf("%d dispatches of q-1 after the takeover, want 1 (its dispatch was lost, and no state says otherwise)", n)
	}
	var ar schemas.AgentRequest
	if err := b.codec.Decode(b.wait(oneTopic, 1).Value, &ar); err != nil || ar.IntentID != "q-1" {
		t.Fatalf("dispatched %+v %v, want q-1", ar, err)
	}
	if n := b.sink.Count(otherTopic); n != 0 {
		t.Fatalf("%d dispatches of b-1 after the takeover, want 0 (its dispatch was acknowledged, and its state says so)", n)
	}
	b.answer("q-1", "one", `{"n":2}`)
	if res := b.result(1); res.IntentID != "q-1" || res.Outcome != schemas.OutcomeAnswered {
		t.Fatalf("q-1 after the takeover: %+v", res)
	}
}

// A dispatch the broker refused is never acknowledged, so its intent's
// state, which says it was dispatched, is never written: the record that
// caused it stays unstored too (TestFailedDeliveryIsNeverCommitted), and
// the partition's next owner reads the request again and dispatches it,
// rather than restoring an intent no agent ever saw as in flight.
func TestAtLeastOnceWritesNoStateForAFailedDispatch(t *testing.T) {
	h := start(t, dispatchFirstConfig, config.AtLeastOnce)
	h.sink.FailTopic(oneTopic, errors.New("broker says no"))
	h.request("f-1", "hog", `{}`)
	h.wait(oneTopic, 1)
	h.request("b-1", "by", `{}`)
	h.wait(otherTopic, 1)
	for i := 0; h.r.Ready() == nil; i++ { // each settle is a round trip through the loop, which takes the failure
		if i == 100 {
			t.Fatal("router stayed ready after a failed delivery")
		}
		h.settle()
	}
	h.advance(5 * time.Millisecond)
	h.waitState(nil, "b-1")
	if got := h.statesOf("f-1"); len(got) != 0 {
		t.Fatalf("f-1: %d changelog records after its dispatch failed (dispatched_at=%d), want none", len(got), got[0].DispatchedAt)
	}
}

// An intent resolved while its state still waits for its dispatch's
// acknowledgement never gets that state written: written when the
// dispatch is acknowledged, after the resolution marker, it would be the
// changelog's newest record of the intent, and the next owner would
// restore the intent and resolve it a second time (seen at planned
// rebalances with producers lingering 300 ms:
// TestPlannedRebalanceMakesNoDuplicateApacheKafka). The request's offset
// is stored once the dispatch, the result and the marker are acknowledged.
func TestAtLeastOnceResolvedWhileItsStateWaitsForTheDispatch(t *testing.T) {
	h := start(t, dispatchFirstConfig, config.AtLeastOnce)
	t.Cleanup(h.sink.Release)
	reqTP := port.TopicPartition{Topic: requests}
	h.sink.HoldTopic(oneTopic)
	h.request("s-1", "hog", `{}`)
	h.wait(oneTopic, 1)
	h.request("b-1", "by", `{}`)
	h.wait(otherTopic, 1)
	h.advance(5 * time.Millisecond) // s-1's state waits for the dispatch; b-1's is written
	h.waitState(nil, "b-1")
	h.answer("s-1", "one", `{}`)
	h.result(1)
	h.waitMarker("s-1")
	if got := h.src.Stored(reqTP); got != -1 {
		t.Fatalf("requests offset %d stored before s-1's dispatch was acknowledged", got)
	}
	h.sink.ReleaseTopic(oneTopic)
	if err := h.src.WaitUntil(h.ctx, func(s *routertest.Source) bool { return s.Stored(reqTP) >= 2 }); err != nil {
		t.Fatalf("requests offset %d once s-1's dispatch was acknowledged, want past b-1: %v", h.src.Stored(reqTP), err)
	}
	h.settle()
	states := h.statesOf("s-1")
	if len(states) != 1 || states[0].ResolvedAt == nil {
		t.Fatalf("s-1's changelog records: %d, the last resolved=%v; want the resolution marker alone", len(states), len(states) > 0 && states[len(states)-1].ResolvedAt != nil)
	}
}

// A timed-out intent's timeout event is written after its result and before
// its resolution marker: a crash after the event but before the result
// left an event whose result was lost, and the next owner, which resolved
// the intent again, could pair a late answer: a timeout event for an
// intent answered (the chaos test's timeout_orphans, under at_least_once
// with a broker restart). Now such a crash leaves at most a result without
// its marker, and the intent is resolved a second time, as at_least_once
// allows.
func TestAtLeastOnceWritesTheTimeoutEventAfterTheResult(t *testing.T) {
	h := start(t, testConfig, config.AtLeastOnce)
	h.request("f-1", "fraud_check", `{"amount":1}`)
	h.wait(slowTopic, 1)
	h.sink.Hold()
	t.Cleanup(h.sink.Release)
	h.advance(300 * time.Millisecond) // the deadline
	h.result(1)
	h.settle()
	if n := h.sink.Count(timeoutsT); n != 0 {
		t.Fatalf("%d timeout events before the result was acknowledged, want 0", n)
	}
	h.sink.Release()
	if ev := h.timeoutEvent(1); ev.IntentID != "f-1" {
		t.Fatalf("timeout event %+v", ev)
	}
	h.waitMarker("f-1")
}
