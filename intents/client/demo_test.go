package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"go.uber.org/goleak"

	"github.com/switchboard-mcp/switchboard/intents/client"
	"github.com/switchboard-mcp/switchboard/router/embedded"
	"github.com/switchboard-mcp/switchboard/router/kafkaio"
	"github.com/switchboard-mcp/switchboard/router/port"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// guard bounds every wait for a handler in these tests: a handler that
// should have returned and did not fails the test instead of hanging it.
const guard = 10 * time.Second

type reply struct {
	answer schemas.JSON
	err    error
}

// call runs h on payload in a goroutine and returns where its reply lands.
func call(ctx context.Context, h client.Handler, payload string) <-chan reply {
	out := make(chan reply, 1)
	go func() {
		a, err := h(ctx, &schemas.AgentRequest{IntentID: "i-1", IntentType: "t", Agent: "demo", Payload: schemas.JSON(payload)})
		out <- reply{a, err}
	}()
	return out
}

func await(t *testing.T, ch <-chan reply) reply {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(guard):
		t.Fatal("the handler did not return")
		return reply{}
	}
}

// notYet fails if the handler already returned. The handler can only return
// when the fake clock fires its timer, so this is not a race.
func notYet(t *testing.T, ch <-chan reply, when string) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("%s: the handler returned early: %+v", when, r)
	default:
	}
}

// echoOf checks that answer is the demo answer for payload and returns it.
func echoOf(t *testing.T, r reply, payload string) {
	t.Helper()
	if r.err != nil {
		t.Fatalf("error %v, want an answer", r.err)
	}
	var got, want any
	if err := json.Unmarshal([]byte(r.answer), &got); err != nil {
		t.Fatalf("answer %q is not JSON: %v", r.answer, err)
	}
	if err := json.Unmarshal([]byte(`{"agent":"demo","echo":`+payload+`}`), &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("answer %s, want {\"agent\":\"demo\",\"echo\":%s}", r.answer, payload)
	}
}

// waitForTimer blocks until the handler waits on the fake clock.
func waitForTimer(t *testing.T, clock *clockwork.FakeClock) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	if err := clock.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal("the handler never waited on the clock")
	}
}

func TestDemoHandlerAnswersAfterItsDelay(t *testing.T) {
	clock := clockwork.NewFakeClock()
	h := client.DemoHandler("demo", 50*time.Millisecond, 0, clock)
	ch := call(context.Background(), h, `{"i":7}`)
	waitForTimer(t, clock)
	clock.Advance(49 * time.Millisecond)
	notYet(t, ch, "after 49ms")
	clock.Advance(time.Millisecond)
	echoOf(t, await(t, ch), `{"i":7}`)
}

func TestDemoHandlerIgnore(t *testing.T) {
	clock := clockwork.NewFakeClock()
	h := client.DemoHandler("demo", time.Hour, 0, clock)
	// It returns at once: the clock never moves in this test.
	r := await(t, call(context.Background(), h, `{"demo":{"ignore":true},"i":10}`))
	if !errors.Is(r.err, client.ErrNoAnswer) || r.answer != "" {
		t.Fatalf("got %+v, want ErrNoAnswer and no answer", r)
	}
	// ignore wins over delay_ms and over the error rate.
	h = client.DemoHandler("demo", 0, 1, clock)
	if r := await(t, call(context.Background(), h, `{"demo":{"ignore":true,"delay_ms":100}}`)); !errors.Is(r.err, client.ErrNoAnswer) {
		t.Fatalf("ignore with delay_ms and error rate 1: %+v", r)
	}
}

func TestDemoHandlerDelayOverride(t *testing.T) {
	clock := clockwork.NewFakeClock()
	h := client.DemoHandler("demo", 50*time.Millisecond, 0, clock)
	payload := `{"demo":{"delay_ms":250},"i":3}`
	ch := call(context.Background(), h, payload)
	waitForTimer(t, clock)
	clock.Advance(50 * time.Millisecond)
	notYet(t, ch, "after the default delay")
	clock.Advance(199 * time.Millisecond)
	notYet(t, ch, "after 249ms")
	clock.Advance(time.Millisecond)
	echoOf(t, await(t, ch), payload) // the echo keeps the directives

	// delay_ms 0 (or less) answers at once, whatever the default delay.
	h = client.DemoHandler("demo", time.Hour, 0, clock)
	for _, p := range []string{`{"demo":{"delay_ms":0}}`, `{"demo":{"delay_ms":-5}}`} {
		echoOf(t, await(t, call(context.Background(), h, p)), p)
	}
}

// Payloads whose "demo" is not a readable top-level object carry no
// directives: they are answered after the default delay, like any other.
func TestDemoHandlerIgnoresWhatIsNotADirective(t *testing.T) {
	for _, p := range []string{
		`{"i":1}`,
		`"demo"`,
		`["demo",{"demo":{"ignore":true}}]`,
		`{"demo":"ignore"}`,
		`{"demo":null}`,
		`{"demo":{"ignore":"yes"}}`,
		`{"demo":{"delay_ms":"soon","ignore":true}}`,
		`{"x":{"demo":{"ignore":true}}}`,
		`{"demo":{"other":1}}`,
	} {
		t.Run(p, func(t *testing.T) {
			clock := clockwork.NewFakeClock()
			h := client.DemoHandler("demo", 50*time.Millisecond, 0, clock)
			ch := call(context.Background(), h, p)
			waitForTimer(t, clock)
			clock.Advance(50 * time.Millisecond)
			echoOf(t, await(t, ch), p)
		})
	}
}

func TestDemoHandlerStopsWithItsContext(t *testing.T) {
	clock := clockwork.NewFakeClock()
	h := client.DemoHandler("demo", time.Minute, 0, clock)
	ctx, cancel := context.WithCancel(context.Background())
	ch := call(ctx, h, `{"demo":{"delay_ms":1000}}`)
	waitForTimer(t, clock)
	cancel()
	if r := await(t, ch); !errors.Is(r.err, context.Canceled) {
		t.Fatalf("got %+v, want context.Canceled", r)
	}
}

func TestDemoHandlerErrorRate(t *testing.T) {
	h := client.DemoHandler("demo", 0, 1, clockwork.NewFakeClock())
	r := await(t, call(context.Background(), h, `{"demo":{"delay_ms":0}}`))
	var retryable interface{ Retryable() bool }
	if r.err == nil || !errors.As(r.err, &retryable) || !retryable.Retryable() || errors.Is(r.err, client.ErrNoAnswer) {
		t.Fatalf("got %+v, want a retryable simulated failure", r)
	}
}

// TestAgentSendsNothingForErrNoAnswer runs an Agent on the embedded broker:
// of two requests, the ignored one gets no response. With one partition and
// one intent served at a time, the ignored request's response, had one been
// sent, would precede the other's on the responses topic.
func TestAgentSendsNothingForErrNoAnswer(t *testing.T) {
	defer goleak.VerifyNone(t, abandonedLogs...)
	c, err := embedded.Start(embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := kafkaio.Settings{Bootstrap: c.Bootstrap()}
	const requests, responses = "demo.agent.request", "demo.agent.response"
	if _, err := kafkaio.CreateTopics(ctx, s, []kafkaio.TopicSpec{
		{Name: requests, Partitions: 1, ReplicationFactor: 1},
		{Name: responses, Partitions: 1, ReplicationFactor: 1},
	}); err != nil {
		t.Fatal(err)
	}
	codec, err := schemas.NewCodec()
	if err != nil {
		t.Fatal(err)
	}
	p, err := kafkaio.NewProducer(s)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(time.Second)
	for _, r := range []struct{ id, payload string }{{"ignored", `{"demo":{"ignore":true}}`}, {"answered", `{"i":2}`}} {
		v, err := codec.Encode(requests, &schemas.AgentRequest{IntentID: r.id, IntentType: "t", Agent: "demo", Payload: schemas.JSON(r.payload), Deadline: 1, Attempt: 1})
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Send(ctx, requests, []byte(r.id), v, nil, time.Time{}); err != nil {
			t.Fatal(err)
		}
	}

	a, err := client.NewAgent(client.AgentConfig{
		Name: "demo", Topic: requests, ResponsesTopic: responses, GroupID: "demo-agent", Kafka: s, Codec: codec, Concurrency: 1,
	}, client.DemoHandler("demo", 0, 0, nil))
	if err != nil {
		t.Fatal(err)
	}
	agentCtx, stopAgent := context.WithCancel(ctx)
	agentDone := make(chan error, 1)
	go func() { agentDone <- a.Run(agentCtx) }()
	defer func() {
		stopAgent()
		if err := <-agentDone; err != nil {
			t.Errorf("agent: %v", err)
		}
	}()

	var seen []string
	found := errors.New("found")
	err = kafkaio.Read(ctx, s, kafkaio.Reading{Topics: []string{responses}, From: kafkaio.FromBeginning()}, func(rec *port.Record) error {
		seen = append(seen, string(rec.Key))
		if string(rec.Key) == "answered" {
			return found
		}
		return nil
	})
	if !errors.Is(err, found) {
		t.Fatalf("no response for the answered request (%v); saw %v", err, seen)
	}
	if len(seen) != 1 {
		t.Fatalf("responses %v, want only the answered one's", seen)
	}
}
