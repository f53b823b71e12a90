//go:build integration

package kafkaio_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/switchboard-mcp/switchboard/router/kafkaio"
	"github.com/switchboard-mcp/switchboard/router/lag"
)

// TestTxnAborterReadsTheCoordinatorsDecisionApacheKafka: Decision reads a
// real broker's transaction log (librdkafka's transactional producer, as
// the router's): commit for the partition of a committed transaction,
// abort for one of an aborted transaction and for a partition the producer
// never had in a transaction, no decision while its transaction on the
// partition is still open, and none for a producer id no transactional id
// has.
func TestTxnAborterReadsTheCoordinatorsDecisionApacheKafka(t *testing.T) {
	bootstrap := os.Getenv("KAFKA_BOOTSTRAP")
	if bootstrap == "" {
		t.Fatal("KAFKA_BOOTSTRAP is not set: run 'make test-integration'")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	topic := newTopic(ctx, t, bootstrap, "txndecision", 4)
	pr, err := kafka.NewProducer(&kafka.ConfigMap{"bootstrap.servers": bootstrap, "transactional.id": topic + ".tx", "enable.metrics.push": false})
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	if err := pr.InitTransactions(ctx); err != nil {
		t.Fatal(err)
	}
	produce := func(partition int32) {
		t.Helper()
		dc := make(chan kafka.Event, 1)
		if err := pr.Produce(&kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: partition}, Value: []byte("x")}, dc); err != nil {
			t.Fatal(err)
		}
		if m, ok := (<-dc).(*kafka.Message); !ok || m.TopicPartition.Error != nil {
			t.Fatalf("the record to partition %d was not delivered: %v", partition, m)
		}
	}
	txn := func(partition int32, commit bool) {
		t.Helper()
		if err := pr.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		produce(partition)
		switch {
		case commit:
			err = pr.CommitTransaction(ctx)
		default:
			err = pr.AbortTransaction(ctx)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	txn(0, true)
	txn(1, false)

	aborter, err := kafkaio.NewTxnAborter(kafkaio.Settings{Bootstrap: bootstrap})
	if err != nil {
		t.Fatal(err)
	}
	defer aborter.Close()
	ps, err := aborter.Producers(ctx, topic, 0)
	if err != nil || len(ps) != 1 {
		t.Fatalf("the producers of %s[0]: %v %v", topic, ps, err)
	}
	p := ps[0]
	for _, c := range []struct {
		partition int32
		want      bool
	}{{0, true}, {1, false}, {2, false}} {
		commit, err := aborter.Decision(ctx, topic, c.partition, p)
		if err != nil || commit != c.want {
			t.Fatalf("Decision on %s[%d] = %v, %v; want %v", topic, c.partition, commit, err, c.want)
		}
	}

	// Open on partition 3: the log says Ongoing, which is no decision.
	if err := pr.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produce(3)
	if commit, err := aborter.Decision(ctx, topic, 3, p); !errors.Is(err, lag.ErrNoDecision) {
		t.Fatalf("Decision on the open transaction = %v, %v; want no decision", commit, err)
	}
	if err := pr.AbortTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	stranger := p
	stranger.ID = 1 << 40
	if commit, err := aborter.Decision(ctx, topic, 0, stranger); !errors.Is(err, lag.ErrNoDecision) {
		t.Fatalf("Decision for a producer id nobody has = %v, %v; want no decision", commit, err)
	}
}
