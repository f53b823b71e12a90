package router_test

import (
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/router"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// The admission queue, a scheduled retry and an idle deadline are pending
// state: an instance that takes the partition over carries them on.

func TestTakeOverRequeuesQueuedIntents(t *testing.T) { both(t, testTakeOverRequeuesQueuedIntents) }

func testTakeOverRequeuesQueuedIntents(t *testing.T, delivery string) {
	a := startPressure(t, delivery)
	a.request("s-1", "slow", `{}`)
	a.wait(slowTopic, 1)
	a.request("s-2", "slow", `{}`) // queued behind s-1
	a.wait(pendingT, 2)
	a.stop()

	b := startPressure(t, delivery, router.WithRestorer(a.changelog()))
	b.settle()
	if n := b.sink.Count(slowTopic); n != 0 {
		t.Fatalf("%d dispatches: the restored queue ignored the restored in-flight intent", n)
	}
	b.agentView("slow", func(v router.AgentView) bool { return v.InFlight == 1 && v.Queued == 1 })
	b.answer("s-1", "slow", `{}`)
	if ar := b.agentRequest(slowTopic, 1); ar.IntentID != "s-2" || ar.Attempt != 1 {
		t.Fatalf("after the takeover dispatched %+v", ar)
	}
	b.wait(results, 1)
	b.settle()
	if n := b.sink.Count(results); n != 1 {
		t.Fatalf("%d results", n)
	}
}

func TestTakeOverKeepsAScheduledRetry(t *testing.T) { both(t, testTakeOverKeepsAScheduledRetry) }

func testTakeOverKeepsAScheduledRetry(t *testing.T, delivery string) {
	a := startPressure(t, delivery)
	a.request("r-1", "retried", `{}`)
	a.wait(echoTopic, 1)
	a.respond("r-1", "echo", schemas.StatusError, &schemas.ErrorInfo{Code: "busy", Message: "busy", Retryable: true}, 1)
	a.wait(pendingT, 2)
	a.stop()

	b := startPressure(t, delivery, router.WithRestorer(a.changelog()))
	b.settle()
	b.advance(101 * time.Millisecond)
	if ar := b.agentRequest(echoTopic, 1); ar.IntentID != "r-1" || ar.Attempt != 2 {
		t.Fatalf("restored retry dispatched %+v", ar)
	}
}

func TestTakeOverKeepsTheIdleDeadline(t *testing.T) { both(t, testTakeOverKeepsTheIdleDeadline) }

func testTakeOverKeepsTheIdleDeadline(t *testing.T, delivery string) {
	a := startPressure(t, delivery)
	a.request("i-1", "streamed", `{}`)
	a.wait(echoTopic, 1)
	a.advance(80 * time.Millisecond)
	a.respond("i-1", "echo", schemas.StatusProgress, nil, 1)
	a.wait(pendingT, 2) // the progress moved the idle deadline to 180ms
	a.stop()

	b := startAt(t, t0.Add(80*time.Millisecond), pressureConfig, delivery, router.WithRestorer(a.changelog()))
	b.settle()
	b.advance(90 * time.Millisecond) // 170ms
	b.settle()
	if n := b.sink.Count(results); n != 0 {
		t.Fatal("timed out before the restored idle deadline")
	}
	b.advance(20 * time.Millisecond) // 190ms, long before the 1s deadline
	if to := b.timeoutEvent(1); to.Reason != schemas.ReasonIdle {
		t.Fatalf("restored intent timed out %+v", to)
	}
}

// goneAgentConfig is pressureConfig after the echo agent was removed: the
// intent types it served now go to another agent.
const goneAgentConfig = `
agents:
  other: {}
intents:
  retried: {agent: other, timeout: 2s, retry: {max_retries: 2, backoff: 100ms, max_backoff: 150ms}, fallback: {static: {x: 1}}}
topics:
  partitions: 1
router:
  commit_interval: 2ms
`

// TestRestoredIntentOfARemovedAgentIsNeverSent: an intent restored for an
// agent no longer configured has nowhere to go: a retryable error resolves it
// agent_error instead of retrying, and a cancel sends no notice. Neither
// produces to an empty topic (a poison pill under exactly_once).
func TestRestoredIntentOfARemovedAgentIsNeverSent(t *testing.T) {
	both(t, testRestoredIntentOfARemovedAgentIsNeverSent)
}

func testRestoredIntentOfARemovedAgentIsNeverSent(t *testing.T, delivery string) {
	a := startPressure(t, delivery)
	a.request("r-1", "retried", `{}`)
	a.request("r-2", "retried", `{}`)
	a.wait(echoTopic, 2)
	a.wait(pendingT, 2)
	a.stop()

	b := start(t, goneAgentConfig, delivery, router.WithRestorer(a.changelog()))
	b.settle()
	b.respond("r-1", "echo", schemas.StatusError, &schemas.ErrorInfo{Code: "busy", Message: "busy", Retryable: true}, 1)
	b.cancelRecord("r-2", nil)
	b.wait(results, 2)
	b.advance(200 * time.Millisecond) // past any backoff
	b.settle()
	if n := b.sink.Count(""); n != 0 {
		t.Fatalf("%d outputs to the empty topic", n)
	}
	if res := b.resultFor("r-1"); res.Outcome != schemas.OutcomeAgentError || res.Attempts != 1 {
		t.Fatalf("r-1: %+v", res)
	}
	if res := b.resultFor("r-2"); res.Outcome != schemas.OutcomeCancelled {
		t.Fatalf("r-2: %+v", res)
	}
}
