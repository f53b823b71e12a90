package kafkaio_test

import (
	"context"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/jonboulle/clockwork"

	"github.com/switchboard-mcp/switchboard/router/embedded"
	"github.com/switchboard-mcp/switchboard/router/kafkaio"
	"github.com/switchboard-mcp/switchboard/router/port"
)

// TestGroupReaderReadsWhileACommitHangs: a commit the coordinator does not
// answer does not stop the GroupReader from reading. After a broker restart
// librdkafka can hold a commit for minutes (it queues it for a coordinator
// it cannot find: librdkafka#5301, socket.timeout.ms, retries); the reader
// committed on its reading goroutine and so read nothing, and served no
// rebalance, until the commit returned (CHANGELOG: the agent runner's stall).
// Here the embedded broker holds every offset commit: the interval's commit
// is held, and a record produced meanwhile is read all the same.
func TestGroupReaderReadsWhileACommitHangs(t *testing.T) {
	c, err := embedded.Start(embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	topic := newTopic(ctx, t, c.Bootstrap(), "grouphold", 1)
	p, err := kafka.NewProducer(&kafka.ConfigMap{"bootstrap.servers": c.Bootstrap(), "enable.metrics.push": false})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	produce := func(v string) {
		t.Helper()
		acked := make(chan kafka.Event, 1)
		if err := p.Produce(&kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: 0}, Value: []byte(v)}, acked); err != nil {
			t.Fatal(err)
		}
		if m := (<-acked).(*kafka.Message); m.TopicPartition.Error != nil {
			t.Fatalf("producing %q: %v", v, m.TopicPartition.Error)
		}
	}

	clock := clockwork.NewFakeClock()
	r, err := kafkaio.NewGroupReader(kafkaio.Settings{Bootstrap: c.Bootstrap()}, topic+".group", []string{topic}, kafkaio.GroupReaderOptions{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	read := make(chan string, 4)
	readCtx, stopRead := context.WithCancel(ctx)
	readDone := make(chan error, 1)
	go func() {
		readDone <- r.Read(readCtx, func(rec *port.Record, done func()) error {
			done()
			read <- string(rec.Value)
			return nil
		})
	}()
	release := func() {}
	defer func() {
		release() // the commit returns, Read and Close can end
		stopRead()
		if err := <-readDone; err != nil {
			t.Errorf("Read: %v", err)
		}
		if err := r.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}()
	expect := func(want string) {
		t.Helper()
		select {
		case got := <-read:
			if got != want {
				t.Fatalf("read %q, want %q", got, want)
			}
		case <-time.After(15 * time.Second):
			t.Fatalf("the reader did not read %q within 15 s", want)
		}
	}

	produce("a")
	expect("a") // done at once: the interval's commit has offset 1 to commit
	held, rel := c.HoldOffsetCommits()
	release = rel
	clock.Advance(time.Second) // the commit interval
	select {
	case <-held:
	case <-time.After(15 * time.Second):
		t.Fatal("no offset commit reached the broker after the commit interval")
	}
	produce("b")
	expect("b") // read while the commit is held
}
