//go:build integration

package conformance

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/switchboard-mcp/switchboard/intents/client"
	"github.com/switchboard-mcp/switchboard/router"
	"github.com/switchboard-mcp/switchboard/router/config"
	"github.com/switchboard-mcp/switchboard/schemas"
)

const stallConfig = `
topics:
  requests: %[1]s.request
  responses: %[1]s.response
  results: %[1]s.result
  timeouts: %[1]s.timeout
  progress: %[1]s.progress
  dead_letter: %[1]s.dlq
  pending: %[1]s.pending
  fallback_cache: %[1]s.cache
  context_snapshots: %[1]s.context
  partitions: 3
kafka:
  group_id: %[1]s.router
agents:
  stally:
    topic: %[1]s.agent.stally
    circuit_breaker: {consecutive_failures: 3, open_for: 1s, half_open_probes: 1}
intents:
  check: {agent: stally, timeout: 1s, fallback: {static: {decision: review}}}
`

// TestStallAndRecover is issue 6's scenario on real Kafka: an agent stalls
// for a while, then recovers. The breaker opens, callers get their fallback
// within their deadlines (at once while the circuit is open, and nothing is
// dispatched to the agent then), the breaker closes once a probe is answered,
// and every intent gets exactly one result.
func TestStallAndRecover(t *testing.T) {
	bootstrap := os.Getenv("KAFKA_BOOTSTRAP")
	if bootstrap == "" {
		t.Fatal("KAFKA_BOOTSTRAP is not set: run 'make test-integration', which starts Apache Kafka, or point it at a broker")
	}
	began := time.Now()
	e := newEnvWith(t, bootstrap, false, config.ExactlyOnce, stallConfig, true)
	ctx, cancel := context.WithTimeout(e.ctx, 55*time.Second)
	defer cancel()

	// The agent: answers at once, or, while stalled, sits on each request
	// past its deadline and sends nothing.
	var stalled atomic.Bool
	var seenMu sync.Mutex
	seen := map[string]int{} // dispatches per intent, as the agent got them
	agent, err := client.NewAgent(client.AgentConfig{
		Name: "stally", Topic: e.cfg.Agents["stally"].Topic, ResponsesTopic: e.cfg.Topics.Responses,
		GroupID: e.cfg.Kafka.GroupID + ".agent", Kafka: e.kafka, Codec: e.codec, Clock: clockwork.NewRealClock(),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}, func(ctx context.Context, req *schemas.AgentRequest) (schemas.JSON, error) {
		seenMu.Lock()
		seen[req.IntentID]++
		seenMu.Unlock()
		if stalled.Load() {
			select {
			case <-time.After(time.Until(time.UnixMilli(req.Deadline)) + 50*time.Millisecond):
			case <-ctx.Done():
			}
			return "", client.ErrNoAnswer
		}
		return schemas.JSON(`{"decision":"approve"}`), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	agentCtx, stopAgent := context.WithCancel(ctx)
	agentDone := make(chan error, 1)
	go func() { agentDone <- agent.Run(agentCtx) }()
	defer func() {
		stopAgent()
		if err := <-agentDone; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("agent: %v", err)
		}
	}()

	// The breaker's states as the router's agent view shows them, in order.
	var statesMu sync.Mutex
	var states []string
	circuit := func() string {
		for _, v := range e.router.Agents() {
			if v.Name == "stally" {
				return v.Circuit
			}
		}
		return ""
	}
	sampleCtx, stopSampling := context.WithCancel(ctx)
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for sampleCtx.Err() == nil {
			s := circuit()
			statesMu.Lock()
			if len(states) == 0 || states[len(states)-1] != s {
				states = append(states, s)
			}
			statesMu.Unlock()
			select {
			case <-sampleCtx.Done():
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	mark := func() int {
		statesMu.Lock()
		defer statesMu.Unlock()
		return len(states)
	}
	sawStateSince := func(from int, s string) bool {
		statesMu.Lock()
		defer statesMu.Unlock()
		for _, x := range states[min(from, len(states)):] {
			if x == s {
				return true
			}
		}
		return false
	}

	var sent []string
	send := func() {
		req := e.intent("check", `{"amount":1}`, "")
		e.publish(req, time.Time{})
		sent = append(sent, req.IntentID)
	}
	// The load is open loop: one intent per tick, whatever the router does.
	pace := func(every time.Duration) *time.Ticker { return time.NewTicker(every) }
	waitFor := func(what string, within time.Duration, cond func() bool) {
		t.Helper()
		tick := pace(25 * time.Millisecond)
		defer tick.Stop()
		deadline := time.Now().Add(within)
		for !cond() {
			if time.Now().After(deadline) || ctx.Err() != nil {
				t.Fatalf("%s: not within %s", what, within)
			}
			send()
			<-tick.C
		}
	}
	sendFor := func(n int, every time.Duration) {
		tick := pace(every)
		defer tick.Stop()
		for range n {
			send()
			<-tick.C
		}
	}
	answeredSince := func(from int) bool { // an intent sent from index from on was answered
		e.results.mu.Lock()
		defer e.results.mu.Unlock()
		ids := map[string]bool{}
		for _, id := range sent[from:] {
			ids[id] = true
		}
		for _, rec := range e.results.recs {
			var res schemas.IntentResult
			if ids[string(rec.Key)] && e.codec.Decode(rec.Value, &res) == nil && res.Outcome == schemas.OutcomeAnswered {
				return true
			}
		}
		return false
	}

	// Healthy: once the agent has joined its group, intents are answered.
	waitFor("the agent answers", 30*time.Second, func() bool { return answeredSince(0) && circuit() == "closed" })
	sendFor(20, 10*time.Millisecond)

	// Stalled: timeouts, then the circuit opens, and stays open or
	// half-open (probes time out too) while the stall lasts.
	stalled.Store(true)
	stallFrom, stallMark := len(sent), mark()
	waitFor("the breaker opens", 10*time.Second, func() bool { return sawStateSince(stallMark, "open") })
	sendFor(80, 25*time.Millisecond) // 2s: open_for passes, a probe goes and fails

	// Recovered: a probe is answered and the circuit closes.
	stalled.Store(false)
	recoverFrom := len(sent)
	waitFor("the breaker closes", 15*time.Second, func() bool { return circuit() == "closed" })
	closedFrom := len(sent)
	sendFor(20, 10*time.Millisecond)
	stopSampling()
	<-sampled

	// Every intent gets exactly one result; none is lost or doubled.
	counts := map[schemas.Outcome]int{}
	var maxLate, maxOpen int64
	openDispatched, answeredAfterClose := 0, 0
	for i, id := range sent {
		rec := e.await(e.results, id, nil)
		var res schemas.IntentResult
		if err := e.codec.Decode(rec.Value, &res); err != nil {
			t.Fatal(err)
		}
		counts[res.Outcome]++
		switch res.Outcome {
		case schemas.OutcomeCircuitOpen:
			// Refused at once, before the deadline, never dispatched.
			maxOpen = max(maxOpen, res.Timeline.ResolvedAt-res.Timeline.ReceivedAt)
			if res.Timeline.ResolvedAt >= res.Timeline.Deadline {
				t.Errorf("%s: circuit_open after its deadline: %+v", id, res.Timeline)
			}
			if res.Answer == nil || string(*res.Answer) != `{"decision":"review"}` {
				t.Errorf("%s: circuit_open without the fallback: %+v", id, res)
			}
			seenMu.Lock()
			n := seen[id]
			seenMu.Unlock()
			if n != 0 {
				openDispatched++
				t.Errorf("%s resolved circuit_open but was dispatched %d times", id, n)
			}
		case schemas.OutcomeFallbackStatic:
			// The fallback comes at the deadline (or on arrival, for the
			// first intents, sent while the router was still joining).
			if i >= stallFrom {
				maxLate = max(maxLate, res.Timeline.ResolvedAt-max(res.Timeline.Deadline, res.Timeline.ReceivedAt))
			}
		case schemas.OutcomeAnswered:
		default:
			t.Errorf("%s (intent %d) resolved %s", id, i, res.Outcome)
		}
		if i >= closedFrom && res.Outcome == schemas.OutcomeAnswered {
			answeredAfterClose++
		}
	}
	// A barrier instead of a wait: one more intent per partition. Its result
	// follows, in its results partition, every result the router wrote
	// before it for that partition, so a second result of any intent above
	// has been read once the barrier's has.
	for p := range int32(e.cfg.Topics.Partitions) {
		for {
			req := e.intent("check", `{"barrier":true}`, "")
			if router.PartitionFor([]byte(req.IntentID), int32(e.cfg.Topics.Partitions)) == p {
				e.publish(req, time.Time{})
				e.await(e.results, req.IntentID, nil)
				break
			}
		}
	}
	dups := 0
	for _, id := range sent {
		if n := e.results.count(id); n != 1 {
			dups++
			t.Errorf("%s has %d results", id, n)
		}
	}
	statesMu.Lock()
	seq := states
	statesMu.Unlock()
	line := fmt.Sprintf("stall: sent=%d (healthy %d, stalled %d, recovering %d, after close %d) results=%d lost=0 doubled=%d "+
		"answered=%d (after close %d) fallback_on_timeout=%d circuit_open=%d circuit_open_dispatched=%d breaker=%s circuit_open_resolve_max_ms=%d "+
		"timeout_past_deadline_max_ms=%d took=%s",
		len(sent), stallFrom, recoverFrom-stallFrom, closedFrom-recoverFrom, len(sent)-closedFrom, len(sent), dups,
		counts[schemas.OutcomeAnswered], answeredAfterClose, counts[schemas.OutcomeFallbackStatic], counts[schemas.OutcomeCircuitOpen], openDispatched,
		strings.Join(seq, ">"), maxOpen, maxLate, time.Since(began).Round(time.Millisecond))
	t.Log(line)
	fmt.Println(line)
	if answeredAfterClose < (len(sent)-closedFrom)/2 {
		t.Errorf("only %d of the %d intents sent after the circuit closed were answered", answeredAfterClose, len(sent)-closedFrom)
	}
	if counts[schemas.OutcomeCircuitOpen] == 0 || counts[schemas.OutcomeFallbackStatic] == 0 {
		t.Errorf("the stall was not seen: %v", counts)
	}
	if maxOpen > 100 {
		t.Errorf("an open circuit took %dms to answer a caller: it should answer at once", maxOpen)
	}
	if maxLate > 500 {
		t.Errorf("a timed-out intent got its fallback %dms after its deadline", maxLate)
	}
}
