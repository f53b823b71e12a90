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
