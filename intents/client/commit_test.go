package client_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/switchboard-mcp/switchboard/intents/client"
	"github.com/switchboard-mcp/switchboard/router/kafkaio"
	"github.com/switchboard-mcp/switchboard/router/port"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// startAgent runs an agent of group "commit-agent" with four slots until
// the returned stop is called; stop returns Run's error.
func (b *agentBench) startAgent(clock clockwork.Clock, h client.Handler) (stop func() error) {
	b.t.Helper()
	a, err := client.NewAgent(client.AgentConfig{
		Name: "demo", Topic: b.requests, ResponsesTopic: b.responses, GroupID: "commit-agent", Kafka: b.s, Codec: b.codec,
		Concurrency: 4, Clock: clock, Logger: slog.New(slog.DiscardHandler),
	}, h)
	if err != nil {
		b.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	return func() error {
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(guard):
			return errors.New("the agent's Run did not return after its context ended")
		}
	}
}

// committed is the agent group's committed offset on the requests topic's
// one partition, -1 for none.
func (b *agentBench) committed() int64 {
	b.t.Helper()
	l, err := kafkaio.NewLagAdmin(b.s)
	if err != nil {
		b.t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	got, err := l.Committed(b.ctx, "commit-agent", b.requests, []int32{0})
	if err != nil {
		b.t.Fatal(err)
	}
	if off, ok := got[0]; ok {
		return off
	}
	return -1
}

// responsesWith tails the responses topic from its start until every id in
// ids has an answer, and returns the keys seen by then.
func (b *agentBench) responsesWith(ids ...string) []string {
	b.t.Helper()
	var seen []string
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	found := errors.New("found")
	err := kafkaio.Read(b.ctx, b.s, kafkaio.Reading{Topics: []string{b.responses}, From: kafkaio.FromBeginning()}, func(rec *port.Record) error {
		seen = append(seen, string(rec.Key))
		delete(want, string(rec.Key))
		if len(want) == 0 {
			return found
		}
		return nil
	})
	if !errors.Is(err, found) {
		b.t.Fatalf("no response for all of %v (%v); saw %v", ids, err, seen)
	}
	return seen
}

// TestAgentCommitsOnlyWhatItAnswered: the agent commits a request's offset
// only once its answer is acknowledged, and never past a request still being
// served. Of a (offset 0), b (1) and c (2), a and c are answered and b's
// handler is still at work when the agent stops: the group's committed
// offset is 1, and the next agent of the group serves b (and c again: an
// answer may repeat, the router pairs the first).
func TestAgentCommitsOnlyWhatItAnswered(t *testing.T) {
	b := newAgentBench(t)
	b.request("a")
	b.request("b")
	b.request("c")
	stop := b.startAgent(nil, func(ctx context.Context, req *schemas.AgentRequest) (schemas.JSON, error) {
		if req.IntentID == "b" {
			<-ctx.Done() // a slow handler: still at work when the agent stops
			return "", ctx.Err()
		}
		return `{"ok":true}`, nil
	})
	if seen := b.responsesWith("a", "c"); slices.Contains(seen, "b") {
		t.Fatalf("responses %v, want a and c only", seen)
	}
	if err := stop(); err != nil {
		t.Fatalf("agent: %v", err)
	}
	if got := b.committed(); got != 1 {
		t.Fatalf("committed offset %d after a and c were answered and b was not, want 1 (b's)", got)
	}

	served := make(chan string, 8)
	stop = b.startAgent(nil, func(_ context.Context, req *schemas.AgentRequest) (schemas.JSON, error) {
		served <- req.IntentID
		return `{"ok":true}`, nil
	})
	b.responsesWith("b")
	if err := stop(); err != nil {
		t.Fatalf("agent: %v", err)
	}
	close(served)
	var again []string
	for id := range served {
		again = append(again, id)
	}
	slices.Sort(again)
	if !slices.Equal(again, []string{"b", "c"}) {
		t.Fatalf("the second agent served %v, want b and c (from the committed offset on)", again)
	}
	if got := b.committed(); got != 3 {
		t.Fatalf("committed offset %d once everything was answered, want 3", got)
	}
}

// TestAgentStopsWhenItsBrokerIsGone: an agent whose broker went away stops
// when asked, within its bound (on its clock) rather than waiting for the
// broker, and says it abandoned the stop. (Without the bound its Run took
// 45 s on the embedded broker, and more than 7 minutes on Apache Kafka.)
func TestAgentStopsWhenItsBrokerIsGone(t *testing.T) {
	b := newAgentBench(t)
	clock := clockwork.NewFakeClock()
	stop := make(chan func() error, 1)
	stop <- b.startAgent(clock, func(context.Context, *schemas.AgentRequest) (schemas.JSON, error) {
		return `{"ok":true}`, nil
	})
	b.request("a")
	b.responsesUntil("a") // answered, and not yet committed: the commit interval is on the fake clock
	b.cluster.Close()
	returned := make(chan error, 1)
	go func() { returned <- (<-stop)() }()
	// Move the agent's clock on until Run returns.
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(guard)
	for {
		select {
		case err := <-returned:
			if !errors.Is(err, client.ErrStopAbandoned) {
				t.Fatalf("Run = %v, want ErrStopAbandoned", err)
			}
			return
		case <-tick.C:
			clock.Advance(time.Minute)
		case <-deadline:
			t.Fatal("the agent did not stop with its broker gone")
		}
	}
}
