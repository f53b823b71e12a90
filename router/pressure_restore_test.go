package router_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/router"
	"github.com/switchboard-mcp/switchboard/router/port"
	"github.com/switchboard-mcp/switchboard/router/routertest"
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
	a.handOver()
	a.waitState(nil, "s-1")
	a.waitState(func(pi *schemas.PendingIntent) bool { return pi.Queued != nil && *pi.Queued }, "s-2")

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
	a.handOver()
	a.waitState(func(pi *schemas.PendingIntent) bool { return pi.RetryAt != nil }, "r-1")

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
	a.handOver()
	// The progress moved the idle deadline to 180ms.
	a.waitState(func(pi *schemas.PendingIntent) bool {
		return pi.IdleDeadline != nil && *pi.IdleDeadline == t0.Add(180*time.Millisecond).UnixMilli()
	}, "i-1")

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
	a.handOver()
	a.waitState(nil, "r-1", "r-2")

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

// retryQueueConfig has an agent that takes one intent at a time, and an
// intent type that retries.
const retryQueueConfig = `
agents:
  one: {max_in_flight: 1}
intents:
  again: {agent: one, timeout: 1s, retry: {max_retries: 2, backoff: 100ms, max_backoff: 100ms}}
  hog:   {agent: one, timeout: 5s}
topics:
  partitions: 1
router:
  commit_interval: 2ms
`

const oneTopic = "mcp.agent.one.request"

// queuedRetry leaves a changelog in which a-1 failed its first attempt and
// its retry waits in the queue behind h-1, and an answer to a-1's first
// attempt, given in time, which the next owner has not read yet.
func queuedRetry(t *testing.T, delivery string) (*harness, []*port.Record) {
	t.Helper()
	a := start(t, retryQueueConfig, delivery, router.WithRand(rand.New(rand.NewPCG(1, 2))))
	a.request("a-1", "again", `{}`)
	a.wait(oneTopic, 1)
	a.respond("a-1", "one", schemas.StatusError, &schemas.ErrorInfo{Code: "busy", Message: "busy", Retryable: true}, 1)
	a.request("h-1", "hog", `{}`)
	a.wait(oneTopic, 2)
	a.advance(100 * time.Millisecond) // the retry is due: queued behind h-1
	a.waitState(func(pi *schemas.PendingIntent) bool { return pi.Queued != nil && *pi.Queued }, "a-1")
	a.waitState(nil, "h-1")
	a.stop()
	ans := schemas.JSON(`{"late":false}`)
	v, err := a.codec.Encode(responses, &schemas.AgentResponse{RequestID: "a-1", Agent: "one", Status: schemas.StatusOK, Answer: &ans, Attempt: schemas.Ptr(int32(1))})
	if err != nil {
		t.Fatal(err)
	}
	return a, []*port.Record{{Topic: responses, Key: []byte("a-1"), Value: v, TimestampMs: t0.Add(500 * time.Millisecond).UnixMilli()}}
}

// TestQueuedRetryWaitsForUnreadResponses: a retry waiting in its agent's
// queue at its deadline is not timed out while an answer to an earlier
// attempt may be unread: on a timer, or restored past its deadline.
func TestQueuedRetryWaitsForUnreadResponses(t *testing.T) {
	both(t, func(t *testing.T, delivery string) {
		t.Run("timer", func(t *testing.T) {
			a, waiting := queuedRetry(t, delivery)
			respTP := port.TopicPartition{Topic: responses}
			b := startWithHook(t, t0.Add(200*time.Millisecond), waiting, func(s *routertest.Source) { s.Stall(respTP) },
				retryQueueConfig, delivery, router.WithRestorer(a.changelog()))
			b.agentView("one", func(v router.AgentView) bool { return v.Queued == 1 })
			b.advance(800 * time.Millisecond) // past a-1's deadline
			// The tick past the deadline took a-1 out of the queue.
			b.agentView("one", func(v router.AgentView) bool { return v.Queued == 0 })
			b.src.Unstall(respTP)
			if res := b.result(1); res.IntentID != "a-1" || res.Outcome != schemas.OutcomeAnswered {
				t.Fatalf("result %+v", res)
			}
			if n := b.sink.Count(oneTopic); n != 0 {
				t.Fatalf("%d dispatches after the deadline", n)
			}
		})
		t.Run("restored", func(t *testing.T) {
			a, waiting := queuedRetry(t, delivery)
			b := startWith(t, t0.Add(2*time.Second), waiting, retryQueueConfig, delivery, router.WithRestorer(a.changelog()))
			if res := b.result(1); res.IntentID != "a-1" || res.Outcome != schemas.OutcomeAnswered {
				t.Fatalf("result %+v", res)
			}
		})
	})
}
