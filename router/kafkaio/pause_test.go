package kafkaio_test

import (
	"context"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/switchboard-mcp/switchboard/router/embedded"
	"github.com/switchboard-mcp/switchboard/router/kafkaio"
	"github.com/switchboard-mcp/switchboard/router/port"
)

func TestAPausedPartitionComesBackUnpausedEmbedded(t *testing.T) {
	c, err := embedded.Start(embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	testPausedPartitionComesBackUnpaused(t, c.Bootstrap())
}

// testPausedPartitionComesBackUnpaused: a Source pauses every partition it
// holds (the router does so while its loop is behind), a rebalance takes
// them away and gives one back, and that partition is fetched again.
// librdkafka keeps an application's pause on a partition across its
// revocation and reassignment (confluent-kafka-go#193) while the router
// forgets its pauses with the revocation: without the Source resuming what
// it is assigned, the partition stayed paused for good. Seen in the
// three-broker drill at 500/s: after a router's kill 14,202 intents had no
// result two minutes on, the routers idle.
func testPausedPartitionComesBackUnpaused(t *testing.T, bootstrap string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	topic := newTopic(ctx, t, bootstrap, "pause", 2)
	group := topic + ".router"
	settings := kafkaio.Settings{Bootstrap: bootstrap, Properties: map[string]string{"session.timeout.ms": "6000", "heartbeat.interval.ms": "500"}}
	first, err := kafkaio.NewSource(settings, group, []string{topic}, kafkaio.SourceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = first.Close() }()

	// The first member holds both partitions and pauses them.
	var held []port.TopicPartition
	for len(held) < 2 {
		if ctx.Err() != nil {
			t.Fatalf("the first member was not assigned both partitions: %v", held)
		}
		if a, ok := first.Poll(100).(port.Assigned); ok {
			held = append(held, a...)
		}
	}
	if err := first.Pause(held); err != nil {
		t.Fatal(err)
	}

	// A second member joins: the group rebalances and each gets one back.
	second, err := kafkaio.NewSource(settings, group, []string{topic}, kafkaio.SourceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = second.Close() }()
	var mine []port.TopicPartition
	revoked, secondHas := false, false
	for !revoked || len(mine) == 0 || !secondHas {
		if ctx.Err() != nil {
			t.Fatalf("no rebalance: revoked %v, first holds %v, second has some %v", revoked, mine, secondHas)
		}
		switch e := first.Poll(50).(type) {
		case port.Revoked:
			revoked, mine = true, nil
		case port.Assigned:
			if revoked {
				mine = append(mine, e...)
			}
		}
		if a, ok := second.Poll(50).(port.Assigned); ok && len(a) > 0 {
			secondHas = true
		}
	}

	// A record on the partition the first member got back reaches it.
	p, err := kafka.NewProducer(&kafka.ConfigMap{"bootstrap.servers": bootstrap, "enable.metrics.push": false})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	back := mine[0]
	if err := p.Produce(&kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: back.Partition}, Value: []byte("after the rebalance")}, nil); err != nil {
		t.Fatal(err)
	}
	p.Flush(10_000)
	for {
		if ctx.Err() != nil {
			t.Fatalf("partition %d, paused before the rebalance and assigned back, was never fetched again", back.Partition)
		}
		_ = second.Poll(10) // keeps the second member in the group
		if r, ok := first.Poll(100).(*port.Record); ok && r.Partition == back.Partition && string(r.Value) == "after the rebalance" {
			return
		}
	}
}
