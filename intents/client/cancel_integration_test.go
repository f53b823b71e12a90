//go:build integration

package client_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/intents"
	"github.com/switchboard-mcp/switchboard/intents/client"
	"github.com/switchboard-mcp/switchboard/router/kafkaio"
	"github.com/switchboard-mcp/switchboard/router/port"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// TestCancelRecordOnRealKafka: Publisher.Cancel writes the cancel record
// every reader relies on (key the intent id, header
// switchboard.control=cancel, JSON value), and an Agent on real Kafka stops
// the handler of an intent when that record reaches its topic.
func TestCancelRecordOnRealKafka(t *testing.T) {
	bootstrap := os.Getenv("KAFKA_BOOTSTRAP")
	if bootstrap == "" {
		t.Fatal("KAFKA_BOOTSTRAP is not set: run 'make test-integration'")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var b [4]byte
	_, _ = rand.Read(b[:])
	prefix := "cancel." + hex.EncodeToString(b[:])
	s := kafkaio.Settings{Bootstrap: bootstrap}
	topic, responses := prefix+".agent.request", prefix+".agent.response"
	if _, err := kafkaio.CreateTopics(ctx, s, []kafkaio.TopicSpec{
		{Name: topic, Partitions: 3, ReplicationFactor: 1},
		{Name: responses, Partitions: 3, ReplicationFactor: 1},
	}); err != nil {
		t.Fatal(err)
	}
	codec, err := schemas.NewCodec()
	if err != nil {
		t.Fatal(err)
	}
	// The router writes the notice to the agent's topic; a Publisher aimed
	// at that topic writes the same record.
	pub, err := client.NewPublisher(s, codec, topic)
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()

	started, causes := make(chan struct{}, 1), make(chan error, 1)
	a, err := client.NewAgent(client.AgentConfig{
		Name: "canceller", Topic: topic, ResponsesTopic: responses, GroupID: prefix + ".agent", Kafka: s, Codec: codec,
	}, func(ctx context.Context, _ *schemas.AgentRequest) (schemas.JSON, error) {
		started <- struct{}{}
		select {
		case <-ctx.Done():
			causes <- context.Cause(ctx)
		case <-time.After(30 * time.Second):
			causes <- errors.New("never cancelled")
		}
		return "", ctx.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	actx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- a.Run(actx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("agent: %v", err)
		}
	}()

	id := intents.NewID()
	req, err := codec.Encode(topic, &schemas.AgentRequest{IntentID: id, IntentType: "t", Agent: "canceller", Payload: "{}", Deadline: time.Now().Add(time.Minute).UnixMilli(), Attempt: 1})
	if err != nil {
		t.Fatal(err)
	}
	p, err := kafkaio.NewProducer(s)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(time.Second)
	if err := p.Send(ctx, topic, []byte(id), req, nil, time.Time{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-ctx.Done():
		t.Fatal("the handler never started")
	}
	if err := pub.Cancel(ctx, id, "caller left"); err != nil {
		t.Fatal(err)
	}
	if cause := <-causes; !errors.Is(cause, client.ErrCancelled) {
		t.Fatalf("the handler's context ended with %v, want ErrCancelled", cause)
	}

	// The record as any reader sees it.
	found := errors.New("found")
	err = kafkaio.Read(ctx, s, kafkaio.Reading{Topics: []string{topic}, From: kafkaio.FromBeginning()}, func(rec *port.Record) error {
		if len(rec.Headers) == 0 {
			return nil
		}
		if string(rec.Key) != id || len(rec.Headers) != 1 || rec.Headers[0].Key != "switchboard.control" || string(rec.Headers[0].Value) != "cancel" {
			t.Fatalf("cancel record: key %q headers %v", rec.Key, rec.Headers)
		}
		c, err := intents.UnmarshalCancel(rec.Key, rec.Value)
		if err != nil || c.IntentID != id || c.Reason != "caller left" || string(rec.Value) != `{"intent_id":"`+id+`","reason":"caller left"}` {
			t.Fatalf("cancel value %s: %+v %v", rec.Value, c, err)
		}
		return found
	})
	if !errors.Is(err, found) {
		t.Fatalf("no cancel record on %s: %v", topic, err)
	}
	t.Logf("cancel: intent %s cancelled in its agent; record key=id header switchboard.control=cancel value %s", id, `{"intent_id","reason"}`)
}
