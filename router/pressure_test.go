package router_test

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/intents"
	"github.com/switchboard-mcp/switchboard/router"
	"github.com/switchboard-mcp/switchboard/router/config"
	"github.com/switchboard-mcp/switchboard/router/port"
	"github.com/switchboard-mcp/switchboard/router/routertest"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// pressureConfig has an agent of each kind of pressure: bounded (one in
// flight, a queue of one), rate limited, behind a circuit breaker, and
// intent types that retry and time out idle.
const pressureConfig = `
agents:
  echo: {}
  slow: {max_in_flight: 1, queue_limit: 1}
  limited: {rate: 2}
  flaky:
    circuit_breaker: {consecutive_failures: 2, open_for: 1s, half_open_probes: 1}
intents:
  echo:     {agent: echo, timeout: 2s}
  slow:     {agent: slow, timeout: 1s, fallback: {static: {decision: review}}}
  limited:  {agent: limited, timeout: 5s}
  flaky:    {agent: flaky, timeout: 500ms, fallback: {static: {ok: false}}}
  retried:  {agent: echo, timeout: 2s, retry: {max_retries: 2, backoff: 100ms, max_backoff: 150ms}, fallback: {static: {x: 1}}}
  streamed: {agent: echo, timeout: 1s, idle_timeout: 100ms}
topics:
  partitions: 1
router:
  commit_interval: 2ms
`

const (
	limitedTopic = "mcp.agent.limited.request"
	flakyTopic   = "mcp.agent.flaky.request"
)

func startPressure(t *testing.T, delivery string, opts ...router.Option) *harness {
	t.Helper()
	return start(t, pressureConfig, delivery, append([]router.Option{router.WithRand(rand.New(rand.NewPCG(1, 2)))}, opts...)...)
}

// respond pushes an agent response with a status, an optional error and an
// optional attempt.
func (h *harness) respond(id, agent string, status schemas.Status, info *schemas.ErrorInfo, attempt int32) {
	h.t.Helper()
	resp := &schemas.AgentResponse{RequestID: id, Agent: agent, Status: status, Error: info}
	if attempt > 0 {
		resp.Attempt = &attempt
	}
	h.push(responses, id, resp)
}

// cancelRecord pushes a cancel control record to the requests topic.
func (h *harness) cancelRecord(key string, value []byte) {
	off := h.offset[requests]
	h.offset[requests]++
	h.src.Push(&port.Record{
		Topic: requests, Offset: off, Key: []byte(key), Value: value, TimestampMs: h.clock.Now().UnixMilli(),
		Headers: []port.Header{{Key: intents.HeaderControl, Value: []byte(intents.ControlCancel)}},
	})
}

func (h *harness) agentRequest(topic string, n int) *schemas.AgentRequest {
	h.t.Helper()
	var ar schemas.AgentRequest
	if err := h.codec.Decode(h.wait(topic, n).Value, &ar); err != nil {
		h.t.Fatal(err)
	}
	return &ar
}

func (h *harness) timeoutEvent(n int) *schemas.IntentTimeout {
	h.t.Helper()
	var to schemas.IntentTimeout
	if err := h.codec.Decode(h.wait(timeoutsT, n).Value, &to); err != nil {
		h.t.Fatal(err)
	}
	return &to
}

// resultFor returns the only result of id, failing if there is not exactly one.
func (h *harness) resultFor(id string) *schemas.IntentResult {
	h.t.Helper()
	var found []*schemas.IntentResult
	for _, o := range h.sink.Outputs(results) {
		if string(o.Key) != id {
			continue
		}
		var res schemas.IntentResult
		if err := h.codec.Decode(o.Value, &res); err != nil {
			h.t.Fatal(err)
		}
		found = append(found, &res)
	}
	if len(found) != 1 {
		h.t.Fatalf("%d results for %s", len(found), id)
	}
	return found[0]
}

// agentView polls the router's published agent views until cond holds for
// the named agent, advancing the fake clock by a view period each time.
func (h *harness) agentView(name string, cond func(router.AgentView) bool) router.AgentView {
	h.t.Helper()
	var last router.AgentView
	for h.ctx.Err() == nil {
		for _, v := range h.r.Agents() {
			if v.Name == name {
				last = v
				if cond(v) {
					return v
				}
			}
		}
		h.advance(time.Millisecond)
		h.settle()
	}
	h.t.Fatalf("agent %s view never matched; last %+v", name, last)
	return last
}

func TestAdmissionQueuesAndShedsBeyondCapacity(t *testing.T) {
	both(t, testAdmissionQueuesAndShedsBeyondCapacity)
}

func testAdmissionQueuesAndShedsBeyondCapacity(t *testing.T, delivery string) {
	h := startPressure(t, delivery)
	h.request("s-1", "slow", `{}`)
	h.wait(slowTopic, 1)
	h.request("s-2", "slow", `{}`) // max_in_flight 1: queued
	h.request("s-3", "slow", `{}`) // queue_limit 1: shed
	h.request("e-1", "echo", `{}`) // another agent: not held up
	h.wait(echoTopic, 1)

	res := h.result(1)
	if res.IntentID != "s-3" || res.Outcome != schemas.OutcomeShed || res.Answer == nil || string(*res.Answer) != `{"decision":"review"}` {
		t.Fatalf("shed result %+v", res)
	}
	if to := h.timeoutEvent(1); to.IntentID != "s-3" || to.Reason != schemas.ReasonShed || to.Fallback != schemas.FallbackStatic {
		t.Fatalf("shed timeout event %+v", to)
	}
	h.settle()
	if n := h.sink.Count(slowTopic); n != 1 {
		t.Fatalf("%d dispatches to slow with one in flight allowed", n)
	}
	v := h.agentView("slow", func(v router.AgentView) bool { return v.Queued == 1 })
	if v.InFlight != 1 || v.MaxInFlight != 1 || v.QueueLimit != 1 {
		t.Fatalf("slow view %+v", v)
	}

	h.answer("s-1", "slow", `{"decision":"approve"}`) // capacity frees: s-2 goes
	if ar := h.agentRequest(slowTopic, 2); ar.IntentID != "s-2" {
		t.Fatalf("dispatched %s after s-1 answered, want s-2", ar.IntentID)
	}
	if got := h.counter("switchboard_intents_resolved_total", "intent_type", "slow", "outcome", "shed"); got != 1 {
		t.Fatalf("shed metric = %v", got)
	}
}

func TestQueuedIntentExpiresWithoutDispatch(t *testing.T) {
	both(t, testQueuedIntentExpiresWithoutDispatch)
}

func testQueuedIntentExpiresWithoutDispatch(t *testing.T, delivery string) {
	h := startPressure(t, delivery)
	h.request("s-1", "slow", `{}`)
	h.wait(slowTopic, 1)
	h.advance(500 * time.Millisecond)
	h.request("s-2", "slow", `{}`) // queued; its deadline is 1.5s after t0
	h.settle()
	h.advance(510 * time.Millisecond) // s-1 times out: s-2 goes
	if ar := h.agentRequest(slowTopic, 2); ar.IntentID != "s-2" {
		t.Fatalf("dispatched %s", ar.IntentID)
	}
	h.advance(200 * time.Millisecond)

	// s-3 waits behind s-2 (deadline 1.5s) and its own deadline (1.41s)
	// passes in the queue.
	h.request("s-3", "slow", `{}`, func(r *schemas.IntentRequest) { r.TimeoutMs = schemas.Ptr[int64](200) })
	h.settle()
	h.advance(210 * time.Millisecond)
	h.wait(results, 2)
	h.settle()
	res := h.resultFor("s-3")
	if res.Outcome != schemas.OutcomeFallbackStatic || res.Timeline.DispatchedAt != nil {
		t.Fatalf("expired in the queue: %+v", res)
	}
	if n := h.sink.Count(slowTopic); n != 2 {
		t.Fatalf("%d dispatches: an intent expired in the queue was dispatched", n)
	}
}

func TestRateLimitSpacesDispatches(t *testing.T) { both(t, testRateLimitSpacesDispatches) }

func testRateLimitSpacesDispatches(t *testing.T, delivery string) {
	h := startPressure(t, delivery)
	for _, id := range []string{"l-1", "l-2", "l-3"} {
		h.request(id, "limited", `{}`)
	}
	h.wait(limitedTopic, 2)
	h.advance(450 * time.Millisecond)
	h.settle()
	if n := h.sink.Count(limitedTopic); n != 2 {
		t.Fatalf("%d dispatches within 450ms at 2/s with a burst of 2", n)
	}
	h.advance(60 * time.Millisecond)
	if ar := h.agentRequest(limitedTopic, 3); ar.IntentID != "l-3" {
		t.Fatalf("third dispatch %s", ar.IntentID)
	}
}

func TestCircuitBreakerOpensProbesAndCloses(t *testing.T) {
	both(t, testCircuitBreakerOpensProbesAndCloses)
}

func testCircuitBreakerOpensProbesAndCloses(t *testing.T, delivery string) {
	h := startPressure(t, delivery)
	h.request("f-1", "flaky", `{}`)
	h.wait(flakyTopic, 1)
	h.respond("f-1", "flaky", schemas.StatusError, &schemas.ErrorInfo{Code: "down", Message: "down"}, 0)
	h.request("f-2", "flaky", `{}`)
	h.wait(flakyTopic, 2)
	h.advance(510 * time.Millisecond) // f-2 times out: the second failure in a row
	h.wait(results, 2)
	if got := h.counter("switchboard_agent_circuit_state", "agent", "flaky"); got != float64(1) {
		t.Fatalf("circuit state gauge = %v, want 1 (open)", got)
	}

	h.request("f-3", "flaky", `{}`)
	h.wait(results, 3)
	res := h.resultFor("f-3")
	if res.Outcome != schemas.OutcomeCircuitOpen || res.Answer == nil || string(*res.Answer) != `{"ok":false}` || res.Timeline.DispatchedAt != nil {
		t.Fatalf("open circuit result %+v", res)
	}
	if to := h.timeoutEvent(2); to.IntentID != "f-3" || to.Reason != schemas.ReasonCircuitOpen {
		t.Fatalf("open circuit timeout event %+v", to)
	}
	h.agentView("flaky", func(v router.AgentView) bool { return v.Circuit == "open" })
	if n := h.sink.Count(flakyTopic); n != 2 {
		t.Fatalf("%d dispatches: one went through an open circuit", n)
	}

	// After open_for, one probe goes; the next intent is refused meanwhile.
	h.advance(time.Second)
	h.request("f-4", "flaky", `{}`)
	if ar := h.agentRequest(flakyTopic, 3); ar.IntentID != "f-4" {
		t.Fatalf("probe %s", ar.IntentID)
	}
	h.request("f-5", "flaky", `{}`)
	h.wait(results, 4)
	if res := h.resultFor("f-5"); res.Outcome != schemas.OutcomeCircuitOpen {
		t.Fatalf("second intent while probing: %+v", res)
	}
	h.answer("f-4", "flaky", `{"ok":true}`)
	h.wait(results, 5)
	h.request("f-6", "flaky", `{}`)
	if ar := h.agentRequest(flakyTopic, 4); ar.IntentID != "f-6" {
		t.Fatalf("after a good probe dispatched %s", ar.IntentID)
	}
	h.agentView("flaky", func(v router.AgentView) bool { return v.Circuit == "closed" })
	if got := h.counter("switchboard_agent_circuit_state", "agent", "flaky"); got != 0 {
		t.Fatalf("circuit state gauge = %v, want 0 (closed)", got)
	}
}

func TestRetryableErrorsAreRetriedWithBackoff(t *testing.T) {
	both(t, testRetryableErrorsAreRetriedWithBackoff)
}

func testRetryableErrorsAreRetriedWithBackoff(t *testing.T, delivery string) {
	h := startPressure(t, delivery)
	busy := &schemas.ErrorInfo{Code: "busy", Message: "try later", Retryable: true}
	h.request("r-1", "retried", `{}`)
	h.wait(echoTopic, 1)
	h.respond("r-1", "echo", schemas.StatusError, busy, 1)
	h.settle()
	h.advance(49 * time.Millisecond) // the first backoff is 100ms, half of it jitter
	h.settle()
	if n := h.sink.Count(echoTopic); n != 1 || h.sink.Count(results) != 0 {
		t.Fatalf("%d dispatches, %d results before the backoff passed", n, h.sink.Count(results))
	}
	h.advance(52 * time.Millisecond)
	if ar := h.agentRequest(echoTopic, 2); ar.IntentID != "r-1" || ar.Attempt != 2 {
		t.Fatalf("retry %+v", ar)
	}

	// A late error from attempt 1 is not attempt 2's.
	h.respond("r-1", "echo", schemas.StatusError, busy, 1)
	h.settle()
	h.advance(200 * time.Millisecond)
	h.settle()
	if n := h.sink.Count(echoTopic); n != 2 {
		t.Fatalf("a stale error caused a retry: %d dispatches", n)
	}
	if got := h.counter("switchboard_responses_stale_total"); got != 1 {
		t.Fatalf("stale responses = %v", got)
	}

	h.respond("r-1", "echo", schemas.StatusError, busy, 2)
	h.settle()
	h.advance(150 * time.Millisecond) // max_backoff
	if ar := h.agentRequest(echoTopic, 3); ar.Attempt != 3 {
		t.Fatalf("second retry %+v", ar)
	}
	// max_retries 2: the third error is final, with the fallback answer.
	h.respond("r-1", "echo", schemas.StatusError, busy, 3)
	res := h.result(1)
	if res.Outcome != schemas.OutcomeAgentError || res.Attempts != 3 || res.Error == nil || res.Error.Message != "try later" ||
		res.Answer == nil || string(*res.Answer) != `{"x":1}` {
		t.Fatalf("result after retries %+v", res)
	}
	if got := h.counter("switchboard_intent_retries_total", "intent_type", "retried"); got != 2 {
		t.Fatalf("retries metric = %v", got)
	}
}

func TestRetryAnsweredAndNotPastTheDeadline(t *testing.T) {
	h := startPressure(t, "at_least_once")
	busy := &schemas.ErrorInfo{Code: "busy", Message: "try later", Retryable: true}
	h.request("r-1", "retried", `{}`)
	h.wait(echoTopic, 1)
	h.respond("r-1", "echo", schemas.StatusError, busy, 0)
	h.settle()
	h.advance(101 * time.Millisecond)
	h.wait(echoTopic, 2)
	h.answer("r-1", "echo", `{"done":true}`)
	if res := h.result(1); res.Outcome != schemas.OutcomeAnswered || res.Attempts != 2 {
		t.Fatalf("answered on retry: %+v", res)
	}

	// A retry that could not go out before the deadline is not scheduled.
	h.request("r-2", "retried", `{}`, func(r *schemas.IntentRequest) { r.TimeoutMs = schemas.Ptr[int64](60) })
	h.wait(echoTopic, 3)
	h.respond("r-2", "echo", schemas.StatusError, busy, 1)
	if res := h.result(2); res.Outcome != schemas.OutcomeAgentError || res.Attempts != 1 {
		t.Fatalf("no time to retry: %+v", res)
	}
}

func TestProgressResetsIdleTimeoutButNotTheDeadline(t *testing.T) {
	both(t, testProgressResetsIdleTimeoutButNotTheDeadline)
}

func testProgressResetsIdleTimeoutButNotTheDeadline(t *testing.T, delivery string) {
	h := startPressure(t, delivery)
	h.request("i-1", "streamed", `{}`)
	h.wait(echoTopic, 1)
	h.advance(80 * time.Millisecond)
	h.respond("i-1", "echo", schemas.StatusProgress, nil, 1)
	h.settle()
	h.advance(80 * time.Millisecond) // 160ms: idle would have passed without the progress
	h.settle()
	if n := h.sink.Count(results); n != 0 {
		t.Fatal("timed out idle despite progress")
	}
	h.advance(30 * time.Millisecond) // 190ms: 110ms since the progress
	if to := h.timeoutEvent(1); to.IntentID != "i-1" || to.Reason != schemas.ReasonIdle {
		t.Fatalf("idle timeout event %+v", to)
	}
	if res := h.result(1); res.Outcome != schemas.OutcomeTimedOut {
		t.Fatalf("idle result %+v", res)
	}

	// Steady progress never extends the hard timeout.
	start := h.clock.Now()
	h.request("i-2", "streamed", `{}`)
	h.wait(echoTopic, 2)
	for h.clock.Since(start) < 950*time.Millisecond {
		h.advance(50 * time.Millisecond)
		h.respond("i-2", "echo", schemas.StatusProgress, nil, 1)
		h.settle()
	}
	h.advance(60 * time.Millisecond)
	if to := h.timeoutEvent(2); to.IntentID != "i-2" || to.Reason != schemas.ReasonDeadline {
		t.Fatalf("deadline timeout event %+v", to)
	}
}

func TestCancelResolvesAndNotifiesTheAgent(t *testing.T) {
	both(t, testCancelResolvesAndNotifiesTheAgent)
}

func testCancelResolvesAndNotifiesTheAgent(t *testing.T, delivery string) {
	h := startPressure(t, delivery)
	h.request("c-1", "echo", `{}`)
	h.wait(echoTopic, 1)
	h.cancelRecord("c-1", []byte(`{"intent_id":"c-1","reason":"user left"}`))
	res := h.result(1)
	if res.IntentID != "c-1" || res.Outcome != schemas.OutcomeCancelled || res.Error == nil || res.Error.Message != "user left" {
		t.Fatalf("cancel result %+v", res)
	}
	notice := h.wait(echoTopic, 2)
	c, err := intents.UnmarshalCancel(notice.Key, notice.Value)
	if err != nil || c.IntentID != "c-1" || string(notice.Key) != "c-1" {
		t.Fatalf("cancel notice %q %q: %v", notice.Key, notice.Value, err)
	}
	if len(notice.Headers) == 0 || notice.Headers[len(notice.Headers)-1].Key != intents.HeaderControl {
		t.Fatalf("cancel notice headers %+v", notice.Headers)
	}

	// Again, and for an intent never seen: counted, no second result. The
	// agent's answer after the cancel is late.
	h.cancelRecord("c-1", nil)
	h.cancelRecord("nobody", nil)
	h.answer("c-1", "echo", `{}`)
	h.settle()
	if n := h.sink.Count(results); n != 1 {
		t.Fatalf("%d results", n)
	}
	if got := h.counter("switchboard_cancels_total", "result", "ignored"); got != 2 {
		t.Fatalf("ignored cancels = %v", got)
	}

	// A cancel without a readable id goes to the dead-letter topic.
	n := h.sink.Count(dlq)
	h.cancelRecord("", []byte("not json"))
	dl := h.wait(dlq, n+1)
	if !hasHeader(dl, port.HeaderErrorClass, router.ClassInvalidControl) {
		t.Fatalf("dead letter headers %+v", dl.Headers)
	}

	// A queued intent is cancelled without a notice: its agent never saw it.
	h.request("s-1", "slow", `{}`)
	h.wait(slowTopic, 1)
	h.request("s-2", "slow", `{}`)
	h.cancelRecord("s-2", nil)
	h.wait(results, 2)
	h.answer("s-1", "slow", `{}`)
	h.wait(results, 3)
	h.settle()
	if n := h.sink.Count(slowTopic); n != 1 {
		t.Fatalf("%d outputs to slow: a cancelled queued intent was dispatched or notified", n)
	}
}

// Queued intents are pending: they count against router.max_pending, which
// pauses the requests partitions, and the pause lifts as the queue drains.
func TestQueuedIntentsCountAgainstMaxPending(t *testing.T) {
	h := start(t, strings.Replace(pressureConfig, "router:\n", "router:\n  max_pending: 3\n", 1), config.AtLeastOnce)
	reqTP := port.TopicPartition{Topic: requests}
	h.request("s-1", "slow", `{}`)
	h.wait(slowTopic, 1)
	h.request("s-2", "slow", `{}`)
	h.request("e-1", "echo", `{}`)
	h.wait(echoTopic, 1)
	h.advance(5 * time.Millisecond)
	if err := h.src.WaitUntil(h.ctx, func(s *routertest.Source) bool { return s.Paused(reqTP) }); err != nil {
		t.Fatal("one in flight, one queued, one elsewhere: requests not paused at max_pending 3")
	}
	h.answer("s-1", "slow", `{}`)
	h.wait(slowTopic, 2)
	h.answer("s-2", "slow", `{}`)
	h.wait(results, 2)
	h.advance(5 * time.Millisecond)
	if err := h.src.WaitUntil(h.ctx, func(s *routertest.Source) bool { return !s.Paused(reqTP) }); err != nil {
		t.Fatal("requests not resumed")
	}
}

// A cancel that names a tenant cancels only that tenant's intent: the API
// stamps the caller's tenant, so one tenant cannot cancel another's intent by
// guessing its id.
func TestCancelOfAnotherTenantsIntentIsRefused(t *testing.T) {
	h := startPressure(t, config.AtLeastOnce)
	acme := "acme"
	h.request("t-1", "echo", `{}`, func(r *schemas.IntentRequest) { r.Tenant = &acme })
	h.wait(echoTopic, 1)
	h.cancelRecord("t-1", []byte(`{"intent_id":"t-1","tenant":"globex"}`))
	h.settle()
	if n := h.sink.Count(results); n != 0 {
		t.Fatalf("another tenant's cancel resolved the intent (%d results)", n)
	}
	if got := h.counter("switchboard_cancels_total", "result", "forbidden"); got != 1 {
		t.Fatalf("forbidden cancels = %v", got)
	}
	h.cancelRecord("t-1", []byte(`{"intent_id":"t-1","tenant":"acme","reason":"mine"}`))
	if res := h.result(1); res.Outcome != schemas.OutcomeCancelled {
		t.Fatalf("own tenant's cancel: %+v", res)
	}
	// The notice names the intent's tenant: an agent serving two tenants'
	// intents of one id stops acme's only.
	notice := h.wait(echoTopic, 2)
	if c, err := intents.UnmarshalCancel(notice.Key, notice.Value); err != nil || c.Tenant != "acme" {
		t.Fatalf("the agent's notice %q does not name the intent's tenant or is unreadable: %v", notice.Value, err)
	}
}
