package client_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/switchboard-mcp/switchboard/intents"
	"github.com/switchboard-mcp/switchboard/intents/client"
	"github.com/switchboard-mcp/switchboard/router/embedded"
	"github.com/switchboard-mcp/switchboard/router/kafkaio"
	"github.com/switchboard-mcp/switchboard/router/port"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// agentBench is an Agent on the embedded broker, with one partition per
// topic so that records keep the order they were sent in.
type agentBench struct {
	t                   *testing.T
	ctx                 context.Context
	s                   kafkaio.Settings
	codec               *schemas.Codec
	p                   *kafkaio.Producer
	requests, responses string
	cancelled           chan string // ids the agent logged as cancelled
	cluster             *embedded.Cluster
}

func newAgentBench(t *testing.T) *agentBench {
	t.Helper()
	t.Cleanup(func() { goleak.VerifyNone(t, abandonedLogs...) }) // the last cleanup to run
	c, err := embedded.Start(embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	b := &agentBench{t: t, ctx: ctx, cluster: c, cancelled: make(chan string, 16), s: kafkaio.Settings{Bootstrap: c.Bootstrap()}, requests: "cancel.agent.request", responses: "cancel.agent.response"}
	if _, err := kafkaio.CreateTopics(ctx, b.s, []kafkaio.TopicSpec{
		{Name: b.requests, Partitions: 1, ReplicationFactor: 1},
		{Name: b.responses, Partitions: 1, ReplicationFactor: 1},
	}); err != nil {
		t.Fatal(err)
	}
	if b.codec, err = schemas.NewCodec(); err != nil {
		t.Fatal(err)
	}
	if b.p, err = kafkaio.NewProducer(b.s); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.p.Close(time.Second) })
	return b
}

func (b *agentBench) request(id string) {
	b.t.Helper()
	v, err := b.codec.Encode(b.requests, &schemas.AgentRequest{IntentID: id, IntentType: "t", Agent: "demo", Payload: "{}", Deadline: 1, Attempt: 1})
	if err != nil {
		b.t.Fatal(err)
	}
	if err := b.p.Send(b.ctx, b.requests, []byte(id), v, nil, time.Time{}); err != nil {
		b.t.Fatal(err)
	}
}

// cancelNotice sends what the router sends an agent when an intent is
// cancelled.
func (b *agentBench) cancelNotice(id, reason string) {
	b.t.Helper()
	v, err := intents.MarshalCancel(intents.Cancel{IntentID: id, Reason: reason})
	if err != nil {
		b.t.Fatal(err)
	}
	h := []port.Header{{Key: intents.HeaderControl, Value: []byte(intents.ControlCancel)}}
	if err := b.p.Send(b.ctx, b.requests, []byte(id), v, h, time.Time{}); err != nil {
		b.t.Fatal(err)
	}
}

// run starts an agent serving one intent at a time; cleanup stops it.
func (b *agentBench) run(h client.Handler) {
	b.t.Helper()
	a, err := client.NewAgent(client.AgentConfig{
		Name: "demo", Topic: b.requests, ResponsesTopic: b.responses, GroupID: "cancel-agent", Kafka: b.s, Codec: b.codec, Concurrency: 1,
		Logger: slog.New(cancelLog{b.cancelled}),
	}, h)
	if err != nil {
		b.t.Fatal(err)
	}
	ctx, stop := context.WithCancel(b.ctx)
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	b.t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			b.t.Errorf("agent: %v", err)
		}
	})
}

// responsesUntil returns the keys of the responses up to the one keyed last.
func (b *agentBench) responsesUntil(last string) []string {
	b.t.Helper()
	var seen []string
	found := errors.New("found")
	err := kafkaio.Read(b.ctx, b.s, kafkaio.Reading{Topics: []string{b.responses}, From: kafkaio.FromBeginning()}, func(rec *port.Record) error {
		seen = append(seen, string(rec.Key))
		if string(rec.Key) == last {
			return found
		}
		return nil
	})
	if !errors.Is(err, found) {
		b.t.Fatalf("no response for %s (%v); saw %v", last, err, seen)
	}
	return seen
}

// TestAgentCancelStopsTheHandlerAndSendsNothing: a cancel notice reaches the
// handler of its intent, even when that handler holds the agent's only slot,
// and the agent sends no response for it even though the handler answers.
// A cancel for an intent not in hand, read before, is ignored.
func TestAgentCancelStopsTheHandlerAndSendsNothing(t *testing.T) {
	b := newAgentBench(t)
	started := make(chan struct{}, 1)
	causes := make(chan error, 1)
	b.run(func(ctx context.Context, req *schemas.AgentRequest) (schemas.JSON, error) {
		if req.IntentID != "stuck" {
			return `{"ok":true}`, nil
		}
		started <- struct{}{}
		select {
		case <-ctx.Done():
			causes <- context.Cause(ctx)
		case <-time.After(guard):
			causes <- errors.New("the handler was never cancelled")
		}
		return `{"answered":"anyway"}`, nil // the agent must drop this
	})
	b.cancelNotice("nobody", "") // not in hand: ignored, and not taken for a request
	b.request("stuck")
	select {
	case <-started:
	case <-time.After(guard):
		t.Fatal("the handler never started")
	}
	b.cancelNotice("stuck", "user left")
	cause := <-causes
	if !errors.Is(cause, client.ErrCancelled) || !strings.Contains(cause.Error(), "user left") {
		t.Fatalf("handler's context cause = %v, want ErrCancelled with the reason", cause)
	}
	b.request("after")
	if seen := b.responsesUntil("after"); len(seen) != 1 {
		t.Fatalf("responses %v, want only the one for after (none for the cancelled intent)", seen)
	}
}

// TestAgentCancelWhileWaitingForASlot: an intent cancelled while it waits
// for a slot is never handed to the handler.
func TestAgentCancelWhileWaitingForASlot(t *testing.T) {
	b := newAgentBench(t)
	release := make(chan struct{})
	handled := make(chan string, 4)
	b.run(func(ctx context.Context, req *schemas.AgentRequest) (schemas.JSON, error) {
		handled <- req.IntentID
		if req.IntentID == "busy" {
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
		return `{"ok":true}`, nil
	})
	b.request("busy")
	if got := <-handled; got != "busy" {
		t.Fatalf("handled %s first", got)
	}
	b.request("queued")
	b.cancelNotice("queued", "")
	// busy holds the only slot until the agent says it cancelled queued.
	select {
	case id := <-b.cancelled:
		if id != "queued" {
			t.Fatalf("cancelled %s", id)
		}
	case <-time.After(guard):
		t.Fatal("the agent never cancelled the waiting intent")
	}
	close(release)
	b.request("after")
	if seen := b.responsesUntil("after"); strings.Join(seen, ",") != "busy,after" {
		t.Fatalf("responses %v, want busy then after", seen)
	}
	close(handled)
	for id := range handled {
		if id == "queued" {
			t.Fatal("the handler was given a cancelled intent")
		}
	}
}

// TestAgentPipelinesItsAnswers: a response handed to the producer frees the
// agent's slot at once; the broker's acknowledgement is not waited for, so
// a slow ack does not cap an agent at Concurrency ÷ ack time. With one slot
// and the broker holding every answer, the agent still serves the next
// intents, and the held answers arrive once the broker lets them through.
func TestAgentPipelinesItsAnswers(t *testing.T) {
	b := newAgentBench(t)
	handled := make(chan string, 8)
	b.run(func(_ context.Context, req *schemas.AgentRequest) (schemas.JSON, error) {
		handled <- req.IntentID
		return `{"ok":true}`, nil
	})
	release := b.cluster.HoldProduce(b.responses)
	t.Cleanup(release)
	for _, id := range []string{"a", "b", "c"} {
		b.request(id)
		select {
		case got := <-handled:
			if got != id {
				t.Fatalf("handled %s, want %s", got, id)
			}
		case <-time.After(guard):
			t.Fatalf("the agent did not serve %s while the broker held the answers before it: its one slot waited for an acknowledgement", id)
		}
	}
	release()
	if seen := b.responsesUntil("c"); strings.Join(seen, ",") != "a,b,c" {
		t.Fatalf("responses %v, want a,b,c", seen)
	}
}

// abandonedStop is the goroutine of an Agent.Run that gave up its stop
// (TestAgentStopsWhenItsBrokerIsGone): it waits for a broker that is gone,
// for as long as librdkafka waits, past the end of the test. Any other
// test whose agent leaves it behind sees Run return ErrStopAbandoned. Its
// consumer is still open, so the goroutines that carry that client's log
// lines (librdkafka's log queue and kafkaio's refusal watch) stay too, and
// so does the reader's commit that the stop waits for (GroupReader commits
// on a goroutine of its own).
var abandonedStop = goleak.IgnoreAnyFunction("github.com/switchboard-mcp/switchboard/intents/client.(*Agent).Run.func3")

var abandonedLogs = []goleak.Option{
	abandonedStop,
	goleak.IgnoreAnyFunction("github.com/switchboard-mcp/switchboard/router/kafkaio.(*GroupReader).commitAsync.func2"),
	goleak.IgnoreAnyFunction("github.com/confluentinc/confluent-kafka-go/v2/kafka.(*handle).pollLogEvents"),
	goleak.IgnoreAnyFunction("github.com/switchboard-mcp/switchboard/router/kafkaio.(*watch).read"),
}

// cancelLog passes the intent ids of the agent's "intent cancelled" log
// lines to a channel.
type cancelLog struct{ ids chan<- string }

func (h cancelLog) Enabled(context.Context, slog.Level) bool { return true }
func (h cancelLog) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h cancelLog) WithGroup(string) slog.Handler            { return h }
func (h cancelLog) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "agent: intent cancelled" {
		return nil
	}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "intent_id" {
			h.ids <- a.Value.String()
		}
		return true
	})
	return nil
}
