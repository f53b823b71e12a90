package router_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/router"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// overloadConfig has an agent without bounds (late shedding only) and one
// with max_in_flight 4 (and so an adaptive limit).
const overloadConfig = `
agents:
  echo: {}
  bounded: {max_in_flight: 4}
intents:
  echo:    {agent: echo, timeout: 1s, fallback: {static: {late: true}}}
  bounded: {agent: bounded, timeout: 1s}
topics:
  partitions: 1
router:
  commit_interval: 2ms
`

const boundedTopic = "mcp.agent.bounded.request"

// warmEcho has echo answer 8 intents in 300 ms each: its answer time
// estimate is then 300 ms.
func warmEcho(h *harness) {
	h.t.Helper()
	for i := range 8 {
		h.request(fmt.Sprintf("w-%d", i), "echo", `{}`)
	}
	h.wait(echoTopic, 8)
	h.settle()
	h.advance(300 * time.Millisecond)
	for i := range 8 {
		h.answer(fmt.Sprintf("w-%d", i), "echo", `{}`)
	}
	h.wait(results, 8)
	h.settle()
}

func TestLateIntentIsShedWithItsFallback(t *testing.T) {
	both(t, testLateIntentIsShedWithItsFallback)
}

func testLateIntentIsShedWithItsFallback(t *testing.T, delivery string) {
	h := start(t, overloadConfig, delivery)
	warmEcho(h)
	if v := h.agentView("echo", func(v router.AgentView) bool { return v.AnswerLatencyMs != 0 }); v.AnswerLatencyMs != 300 {
		t.Fatalf("echo's answer time after 8 answers in 300 ms: %d ms, want 300", v.AnswerLatencyMs)
	}
	h.request("k-1", "echo", `{}`) // in flight: the estimate is current
	h.wait(echoTopic, 9)

	// Waited 750 of its 1,000 ms: 250 left, less than the 300 an answer takes.
	now := h.clock.Now()
	h.push(requests, "late-1", &schemas.IntentRequest{IntentID: "late-1", IntentType: "echo", Payload: schemas.JSON(`{}`)}, now.Add(-750*time.Millisecond))
	// Waited 600: 400 left, room for an answer.
	h.push(requests, "room-1", &schemas.IntentRequest{IntentID: "room-1", IntentType: "echo", Payload: schemas.JSON(`{}`)}, now.Add(-600*time.Millisecond))
	if ar := h.agentRequest(echoTopic, 10); ar.IntentID != "room-1" {
		t.Fatalf("dispatched %s, want room-1 (late-1 has no room)", ar.IntentID)
	}
	h.wait(results, 9)
	h.settle()
	res := h.resultFor("late-1")
	if res.Outcome != schemas.OutcomeShed || res.Answer == nil || string(*res.Answer) != `{"late":true}` || res.Timeline.DispatchedAt != nil {
		t.Fatalf("late intent's result %+v: want shed with the static fallback, never dispatched", res)
	}
	if to := h.timeoutEvent(1); to.IntentID != "late-1" || to.Reason != schemas.ReasonShed || to.Fallback != schemas.FallbackStatic {
		t.Fatalf("late intent's timeout event %+v", to)
	}
	if got := h.counter("switchboard_intents_shed_total", "agent", "echo", "cause", "late"); got != 1 {
		t.Fatalf("switchboard_intents_shed_total{cause=late} = %v, want 1", got)
	}

	// The same request again (a producer's retry): no second result, no
	// dispatch.
	h.push(requests, "late-1", &schemas.IntentRequest{IntentID: "late-1", IntentType: "echo", Payload: schemas.JSON(`{}`)}, now.Add(-750*time.Millisecond))
	h.answer("room-1", "echo", `{}`)
	h.wait(results, 10)
	h.settle()
	h.resultFor("late-1")
	if n := h.sink.Count(echoTopic); n != 10 {
		t.Fatalf("%d dispatches to echo, want 10: a shed intent was dispatched", n)
	}
}

// With nothing in flight the bound is not trusted: the intent goes, and its
// answer refreshes the bound.
func TestLateSheddingProbesWithNothingInFlight(t *testing.T) {
	h := start(t, overloadConfig, "at_least_once")
	warmEcho(h)
	now := h.clock.Now()
	h.push(requests, "p-1", &schemas.IntentRequest{IntentID: "p-1", IntentType: "echo", Payload: schemas.JSON(`{}`)}, now.Add(-750*time.Millisecond))
	if ar := h.agentRequest(echoTopic, 9); ar.IntentID != "p-1" {
		t.Fatalf("dispatched %s, want the probe p-1", ar.IntentID)
	}
}

// shed_late: false dispatches a late intent as before.
func TestLateSheddingOff(t *testing.T) {
	h := start(t, overloadConfig+"\n", "at_least_once")
	if err := h.reload(`
agents:
  echo: {overload: {shed_late: false}}
  bounded: {max_in_flight: 4}
intents:
  echo:    {agent: echo, timeout: 1s, fallback: {static: {late: true}}}
  bounded: {agent: bounded, timeout: 1s}
topics:
  partitions: 1
router:
  commit_interval: 2ms
`, "at_least_once"); err != nil {
		t.Fatal(err)
	}
	warmEcho(h)
	h.request("k-1", "echo", `{}`)
	h.wait(echoTopic, 9)
	h.push(requests, "late-1", &schemas.IntentRequest{IntentID: "late-1", IntentType: "echo", Payload: schemas.JSON(`{}`)}, h.clock.Now().Add(-750*time.Millisecond))
	if ar := h.agentRequest(echoTopic, 10); ar.IntentID != "late-1" {
		t.Fatalf("dispatched %s, want late-1", ar.IntentID)
	}
}

func TestInFlightLimitShrinksOnTimeoutsAndRecovers(t *testing.T) {
	both(t, testInFlightLimitShrinksOnTimeoutsAndRecovers)
}

func testInFlightLimitShrinksOnTimeoutsAndRecovers(t *testing.T, delivery string) {
	h := start(t, overloadConfig, delivery)
	for i := range 4 {
		h.request(fmt.Sprintf("b-%d", i), "bounded", `{}`)
	}
	h.wait(boundedTopic, 4)
	h.settle()
	h.advance(1001 * time.Millisecond) // all four time out: one cut, 4 → 2
	h.wait(results, 4)
	h.settle()
	if v := h.agentView("bounded", func(v router.AgentView) bool { return v.InFlight == 0 }); v.InFlightLimit != 2 || v.MaxInFlight != 4 {
		t.Fatalf("bounded after four timeouts: %+v, want in_flight_limit 2 of max_in_flight 4", v)
	}

	for i := range 4 {
		h.request(fmt.Sprintf("c-%d", i), "bounded", `{}`)
	}
	h.wait(boundedTopic, 6)
	h.settle()
	if n := h.sink.Count(boundedTopic); n != 6 {
		t.Fatalf("%d dispatches with an in-flight limit of 2: want 4 + 2 (the rest queued)", n)
	}
	if v := h.agentView("bounded", func(v router.AgentView) bool { return v.Queued == 2 }); v.InFlight != 2 {
		t.Fatalf("bounded: %+v, want 2 in flight and 2 queued", v)
	}

	// Answers in time raise it again: 2 → 2.5 → 2.9 → 3.24 (3), and the
	// queued intents go as it does.
	for i := range 3 {
		h.answer(fmt.Sprintf("c-%d", i), "bounded", `{}`)
		h.settle()
	}
	h.wait(boundedTopic, 8)
	if v := h.agentView("bounded", func(v router.AgentView) bool { return v.InFlightLimit == 3 }); v.Queued != 0 {
		t.Fatalf("bounded after three answers: %+v", v)
	}
	h.answer("c-3", "bounded", `{}`)
	h.settle()
	for i := range 8 { // four more rounds of answers bring it back to max_in_flight
		id := fmt.Sprintf("d-%d", i)
		h.request(id, "bounded", `{}`)
		h.wait(boundedTopic, 9+i)
		h.request(id+"x", "bounded", `{}`)
		h.request(id+"y", "bounded", `{}`)
		h.settle()
		h.answer(id, "bounded", `{}`)
		h.answer(id+"x", "bounded", `{}`)
		h.answer(id+"y", "bounded", `{}`)
		h.settle()
	}
	h.agentView("bounded", func(v router.AgentView) bool { return v.InFlightLimit == 4 })
}

// Late answers count in the bound: an agent slowing past its intents'
// deadlines makes the next late intents shed, although no answer arrives in
// time any more.
func TestLateAnswersRaiseTheLatencyBound(t *testing.T) {
	h := start(t, overloadConfig, "at_least_once")
	warmEcho(h) // bound 341 ms
	for i := range 8 {
		h.request(fmt.Sprintf("s-%d", i), "echo", `{}`)
	}
	h.wait(echoTopic, 16)
	h.settle()
	h.advance(1001 * time.Millisecond) // all eight time out
	h.wait(results, 16)
	h.settle()
	h.advance(499 * time.Millisecond)
	for i := range 8 {
		h.answer(fmt.Sprintf("s-%d", i), "echo", `{}`) // 1.5 s after their dispatch
	}
	h.settle()
	v := h.agentView("echo", func(v router.AgentView) bool { return v.AnswerLatencyMs > 1000 })
	if v.AnswerLatencyMs > 1500 {
		t.Fatalf("answer time %d ms after late answers of 1.5 s", v.AnswerLatencyMs)
	}
	if got := h.counter("switchboard_responses_late_total"); got != 8 {
		t.Fatalf("late responses %v, want 8", got)
	}
}

// An agent that answers close to its intents' timeout, with a spread, is
// still given fresh intents: late shedding compares with its typical answer
// time (about 770 ms here), not an upper bound (which would be past the 1 s
// timeout, and shed every intent but the probe although about half of them
// are answered in time).
func TestLateSheddingDispatchesToASlowAgentWithRoom(t *testing.T) {
	h := start(t, overloadConfig, "at_least_once")
	for i := range 8 {
		h.request(fmt.Sprintf("w-%d", i), "echo", `{}`)
	}
	h.wait(echoTopic, 8)
	h.settle()
	h.advance(600 * time.Millisecond)
	for i := range 4 {
		h.answer(fmt.Sprintf("w-%d", i), "echo", `{}`)
	}
	h.wait(results, 4)
	h.settle()
	h.advance(390 * time.Millisecond) // 990 ms: in time
	for i := 4; i < 8; i++ {
		h.answer(fmt.Sprintf("w-%d", i), "echo", `{}`)
	}
	h.wait(results, 8)
	h.settle()
	// The loop publishes the view on its tick, which the clock's advance
	// above can deliver between the late answers (the view then shows 649
	// ms, one of them): wait for the estimate of all eight, 600 ms smoothed
	// towards 990 ms four times by 1/8 (762 ms).
	v := h.agentView("echo", func(v router.AgentView) bool { return v.AnswerLatencyMs > 750 })
	if v.AnswerLatencyMs > 800 {
		t.Fatalf("echo's answer time after answers of 600 and 990 ms: %d ms, want about 770", v.AnswerLatencyMs)
	}
	h.request("k-1", "echo", `{}`) // in flight: the estimate is trusted
	h.wait(echoTopic, 9)
	// Waited 150 of its 1,000 ms: 850 left, room for a typical answer.
	h.push(requests, "fresh-1", &schemas.IntentRequest{IntentID: "fresh-1", IntentType: "echo", Payload: schemas.JSON(`{}`)}, h.clock.Now().Add(-150*time.Millisecond))
	if ar := h.agentRequest(echoTopic, 10); ar.IntentID != "fresh-1" {
		t.Fatalf("dispatched %s, want fresh-1", ar.IntentID)
	}
	if got := h.counter("switchboard_intents_shed_total", "agent", "echo", "cause", "late"); got != 0 {
		t.Fatalf("switchboard_intents_shed_total{cause=late} = %v, want 0", got)
	}
}

// After an outage the answers it held back (late, seconds after their
// dispatch) leave an estimate far above what the agent takes. The probe sent
// with nothing in flight answers fast: its answer replaces the estimate, so
// the next intents with room are dispatched, not shed one probe round at a
// time (the drill after each broker restart; BENCHMARKS.md, issue 16 item 4).
func TestLateSheddingProbeReplacesAStaleEstimate(t *testing.T) {
	h := start(t, overloadConfig, "at_least_once")
	warmEcho(h) // 300 ms
	for i := range 9 {
		h.request(fmt.Sprintf("o-%d", i), "echo", `{}`)
	}
	h.wait(echoTopic, 17)
	h.settle()
	h.advance(3 * time.Second) // an outage: all nine time out
	h.wait(results, 17)
	h.settle()
	for i := range 8 { // its answers come 3 s after their dispatch
		h.answer(fmt.Sprintf("o-%d", i), "echo", `{}`)
	}
	h.settle()
	h.agentView("echo", func(v router.AgentView) bool { return v.AnswerLatencyMs > 2000 })

	h.request("probe", "echo", `{}`) // nothing in flight: dispatched, the probe
	if ar := h.agentRequest(echoTopic, 18); ar.IntentID != "probe" {
		t.Fatalf("dispatched %s, want the probe", ar.IntentID)
	}
	h.request("while-probing", "echo", `{}`) // the estimate is stale but not yet refreshed: shed
	h.wait(results, 18)
	h.settle()
	if res := h.resultFor("while-probing"); res.Outcome != schemas.OutcomeShed {
		t.Fatalf("while-probing: %s, want shed", res.Outcome)
	}
	h.advance(50 * time.Millisecond)
	h.answer("probe", "echo", `{}`)
	h.wait(results, 19)
	h.settle()
	h.answer("o-8", "echo", `{}`) // a straggler dispatched before the probe: it does not count
	h.settle()
	if v := h.agentView("echo", func(v router.AgentView) bool { return v.AnswerLatencyMs < 2000 }); v.AnswerLatencyMs != 50 {
		t.Fatalf("echo's answer time after the probe's answer in 50 ms: %d ms, want 50", v.AnswerLatencyMs)
	}
	h.request("f-1", "echo", `{}`)
	h.wait(echoTopic, 19)
	h.request("f-2", "echo", `{}`) // f-1 in flight: the estimate is trusted, and has room
	if ar := h.agentRequest(echoTopic, 20); ar.IntentID != "f-2" {
		t.Fatalf("dispatched %s, want f-2", ar.IntentID)
	}
	if got := h.counter("switchboard_intents_shed_total", "agent", "echo", "cause", "late"); got != 1 {
		t.Fatalf("switchboard_intents_shed_total{cause=late} = %v, want 1 (while-probing)", got)
	}
}

// An intent restored at a takeover was dispatched by the previous owner: its
// answer, in time or late, says how long the takeover took, not how long the
// agent takes, and does not feed the new owner's estimate.
func TestTakenOverDispatchesDoNotFeedTheAnswerTime(t *testing.T) {
	a := start(t, overloadConfig, "at_least_once")
	a.request("r-1", "echo", `{}`)
	a.request("r-2", "echo", `{}`)
	a.wait(echoTopic, 2)
	a.handOver()
	a.wait(pendingT, 2)

	b := startAt(t, t0.Add(100*time.Millisecond), overloadConfig, "at_least_once", router.WithRestorer(a.changelog()))
	b.settle()
	warmEcho(b) // 300 ms, at t0+400ms
	b.advance(400 * time.Millisecond)
	b.answer("r-1", "echo", `{}`) // 800 ms after a's dispatch, in time
	b.wait(results, 9)
	b.settle()
	b.advance(700 * time.Millisecond) // r-2 times out at t0+1s
	b.wait(results, 10)
	b.settle()
	b.answer("r-2", "echo", `{}`) // late: 1.5 s after a's dispatch
	b.settle()
	b.advance(100 * time.Millisecond) // the agents' views are published every 100 ms
	b.settle()
	if got := b.counter("switchboard_responses_late_total"); got != 1 {
		t.Fatalf("late responses %v, want 1 (r-2)", got)
	}
	if v := b.agentView("echo", func(v router.AgentView) bool { return v.AnswerLatencyMs != 0 }); v.AnswerLatencyMs != 300 {
		t.Fatalf("echo's answer time %d ms after the restored intents' answers, want 300 (its own answers only)", v.AnswerLatencyMs)
	}
}
