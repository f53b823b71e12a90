//go:build integration

package kafkaio_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/switchboard-mcp/switchboard/router/kafkaio"
	"github.com/switchboard-mcp/switchboard/router/port"
)

// TestAtOnceVisibleWhileTheTransactionIsOpenApacheKafka: what TxSink sends
// at once (the router's dispatches) is acknowledged on Acks and read by a
// read_committed reader while the transaction open beside it holds its own
// record back until the commit (issue 16, "dispatch at once").
func TestAtOnceVisibleWhileTheTransactionIsOpenApacheKafka(t *testing.T) {
	bootstrap := os.Getenv("KAFKA_BOOTSTRAP")
	if bootstrap == "" {
		t.Fatal("KAFKA_BOOTSTRAP is not set: run 'make test-integration'")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	tag := hex.EncodeToString(b)
	agentTopic, txTopic := "ao.agent."+tag, "ao.tx."+tag
	admin, err := kafka.NewAdminClient(&kafka.ConfigMap{"bootstrap.servers": bootstrap})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	res, err := admin.CreateTopics(ctx, []kafka.TopicSpecification{
		{Topic: agentTopic, NumPartitions: 1, ReplicationFactor: 1}, {Topic: txTopic, NumPartitions: 1, ReplicationFactor: 1},
	})
	if err != nil || res[0].Error.Code() != kafka.ErrNoError || res[1].Error.Code() != kafka.ErrNoError {
		t.Fatalf("creating topics: %v %v", err, res)
	}

	sink, err := kafkaio.NewTxSink(ctx, kafkaio.Settings{Bootstrap: bootstrap}, "ao."+tag)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sink.Close() }()
	if err := sink.Begin(); err != nil {
		t.Fatal(err)
	}
	if err := sink.Produce(&port.Output{Topic: txTopic, Key: []byte("k"), Value: []byte("in the transaction")}, nil); err != nil {
		t.Fatal(err)
	}
	opaque := new(int)
	if err := sink.ProduceAtOnce(&port.Output{Topic: agentTopic, Key: []byte("k"), Value: []byte("dispatch")}, opaque); err != nil {
		t.Fatal(err)
	}
	select {
	case a := <-sink.Acks():
		if a.Err != nil || a.Opaque != opaque {
			t.Fatalf("ack %+v, want no error and the opaque given", a)
		}
	case <-ctx.Done():
		t.Fatal("the record sent at once was never acknowledged")
	}

	agent := readCommitted(t, bootstrap, agentTopic)
	defer func() { _ = agent.Close() }()
	if m := readOne(ctx, t, agent); string(m.Value) != "dispatch" {
		t.Fatalf("read %q on the agent's topic", m.Value)
	}
	// The transaction's own record stays unread until the commit: its
	// topic's last stable offset is still before it.
	tp := kafka.TopicPartition{Topic: &txTopic, Partition: 0}
	lso, err := admin.ListOffsets(ctx, map[kafka.TopicPartition]kafka.OffsetSpec{tp: kafka.LatestOffsetSpec},
		kafka.SetAdminIsolationLevel(kafka.IsolationLevelReadCommitted))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range lso.ResultInfos {
		if r.Error.Code() != kafka.ErrNoError || r.Offset != 0 {
			t.Fatalf("the transaction's topic has last stable offset %d (%v) before the commit, want 0", r.Offset, r.Error)
		}
	}
	txReader := readCommitted(t, bootstrap, txTopic)
	defer func() { _ = txReader.Close() }()
	if err := sink.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if m := readOne(ctx, t, txReader); string(m.Value) != "in the transaction" {
		t.Fatalf("read %q after the commit", m.Value)
	}
}

func readCommitted(t *testing.T, bootstrap, topic string) *kafka.Consumer {
	t.Helper()
	c, err := kafka.NewConsumer(&kafka.ConfigMap{
		"bootstrap.servers": bootstrap, "group.id": topic + ".reader", "auto.offset.reset": "earliest",
		"isolation.level": "read_committed", "enable.auto.commit": false,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Assign([]kafka.TopicPartition{{Topic: &topic, Partition: 0, Offset: kafka.OffsetBeginning}}); err != nil {
		t.Fatal(err)
	}
	return c
}

// readOne returns the next record, waiting until ctx ends.
func readOne(ctx context.Context, t *testing.T, c *kafka.Consumer) *kafka.Message {
	t.Helper()
	for ctx.Err() == nil {
		m, err := c.ReadMessage(200 * time.Millisecond)
		if err == nil {
			return m
		}
		var kerr kafka.Error
		if !errors.As(err, &kerr) || !kerr.IsTimeout() {
			t.Fatal(err)
		}
	}
	t.Fatal("nothing read before the deadline")
	return nil
}
