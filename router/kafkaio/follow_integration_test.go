//go:build integration

package kafkaio_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/switchboard-mcp/switchboard/router/kafkaio"
	"github.com/switchboard-mcp/switchboard/router/port"
)

// testFollowLiveOpenTransaction: records of a transaction still open when
// Read FromEnd (was FollowLive) starts are delivered once it commits (the feed starts at the
// last stable offset, not at the high watermark past them).
func testFollowLiveOpenTransaction(t *testing.T, bootstrap string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	topic := newTopic(ctx, t, bootstrap, "fl", 1)

	p, err := kafka.NewProducer(&kafka.ConfigMap{"bootstrap.servers": bootstrap, "transactional.id": topic + ".tx"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.InitTransactions(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	const n = 3
	delivered := make(chan kafka.Event, n)
	for i := range n {
		if err := p.Produce(&kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: 0}, Value: []byte{byte('a' + i)}}, delivered); err != nil {
			t.Fatal(err)
		}
	}
	for range n { // on the broker, in the open transaction
		select {
		case ev := <-delivered:
			if m, ok := ev.(*kafka.Message); !ok || m.TopicPartition.Error != nil {
				t.Fatalf("producing: %v", ev)
			}
		case <-ctx.Done():
			t.Fatal("the transaction's records were not delivered")
		}
	}

	ready := make(chan kafkaio.Offsets, 1)
	got := make(chan string, n)
	feedCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- kafkaio.Read(feedCtx, kafkaio.Settings{Bootstrap: bootstrap},
			kafkaio.Reading{Topics: []string{topic}, From: kafkaio.FromEnd(), OnStart: func(start kafkaio.Offsets) { ready <- start }},
			func(r *port.Record) error { got <- string(r.Value); return nil })
	}()
	defer func() {
		stop()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("Read: %v", err)
		}
	}()
	select {
	case start := <-ready:
		if start[topic][0] != 0 {
			t.Errorf("start offset = %d, want 0 (the last stable offset, before the open transaction)", start[topic][0])
		}
	case err := <-done:
		t.Fatalf("Read ended before it was ready: %v", err)
	case <-ctx.Done():
		t.Fatal("Read never called OnStart")
	}
	if err := p.CommitTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.NewTimer(20 * time.Second)
	defer deadline.Stop()
	for i := range n {
		select {
		case v := <-got:
			if want := string(rune('a' + i)); v != want {
				t.Errorf("record %d = %q, want %q", i, v, want)
			}
		case <-deadline.C:
			t.Fatalf("got %d of the %d records of the transaction committed after Read started", i, n)
		}
	}
}
