package kafkaio

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/switchboard-mcp/switchboard/router/port"
)

// Producer publishes records and waits for the broker's acknowledgement: the
// client the API, the command line and the demo agents publish with. It is
// safe for concurrent use.
type Producer struct {
	p         *kafka.Producer
	w         *watch
	wg        sync.WaitGroup
	closeOnce sync.Once
}

// NewProducer creates an idempotent producer with the murmur2 partitioner.
//
// While the brokers refuse it (its credentials, or a certificate it does not
// trust: librdkafka retries those for ever), Send and SendTo fail at once
// with a *RefusedError instead of waiting for their context or the
// delivery timeout; a record the broker denies for want of an ACL fails
// with one too.
func NewProducer(s Settings) (*Producer, error) {
	return startProducer(s, producerSettings(s))
}

// NewAnswerProducer creates the producer an agent answers with: NewProducer's
// settings, but not idempotent and with one request in flight per broker.
// librdkafka's idempotent producer (v2.11.1) busy-loops a broker thread
// while a partition waits for its in-flight requests — five unacknowledged
// under acks=all while an in-sync replica is away, or a leader change
// draining the old leader's — and records are queued behind them:
// rd_kafka_toppar_producer_serve sets the thread's next wakeup to "now"
// before it finds it may not send (rdkafka_broker.c; librdkafka#3692). In the
// three-broker drill each agent process took a whole core through every
// broker restart. An answer needs no broker-side de-duplication: the router
// pairs answers by (tenant, intent id) and takes only the first, and drops
// a progress chunk whose sequence is not past the last it accepted; one
// request in flight keeps a retried request from overtaking the next, so
// the chunks stay in order.
func NewAnswerProducer(s Settings) (*Producer, error) {
	return startProducer(s, answerProducerSettings(s))
}

// answerProducerSettings are NewAnswerProducer's: kafka.properties cannot
// turn idempotence back on.
func answerProducerSettings(s Settings) kafka.ConfigMap {
	m := producerSettings(s)
	m["enable.idempotence"] = false
	m["max.in.flight.requests.per.connection"] = 1
	return m
}

func startProducer(s Settings, settings kafka.ConfigMap) (*Producer, error) {
	p, w, err := newProducer(s, "producer", settings)
	if err != nil {
		return nil, err
	}
	k := &Producer{p: p, w: w}
	k.wg.Add(1)
	go func() {
		defer k.wg.Done()
		for ev := range p.Events() {
			if m, ok := ev.(*kafka.Message); ok {
				err := m.TopicPartition.Error
				if err == nil {
					w.accepted()
				} else if m.TopicPartition.Topic != nil {
					err = s.refusal(err, "Write", "topic "+*m.TopicPartition.Topic)
				}
				switch done := m.Opaque.(type) {
				case chan error:
					done <- err
				case func(error):
					done(err)
				}
			}
		}
	}()
	return k, nil
}

// Send publishes one record and waits until the broker acknowledged it or ctx
// ended. A zero timestamp lets the client stamp the record.
func (k *Producer) Send(ctx context.Context, topic string, key, value []byte, headers []port.Header, ts time.Time) error {
	return k.SendTo(ctx, topic, kafka.PartitionAny, key, value, headers, ts)
}

// SendTo is Send to one partition (kafka.PartitionAny, -1: the partitioner
// chooses).
func (k *Producer) SendTo(ctx context.Context, topic string, partition int32, key, value []byte, headers []port.Header, ts time.Time) error {
	if err := k.w.refusal(); err != nil {
		return err
	}
	done := make(chan error, 1)
	if err := k.produce(topic, partition, key, value, headers, ts, done); err != nil {
		return err
	}
	for {
		refused := k.w.refusedC()
		select {
		case err := <-done:
			if err != nil {
				return refusedOr(err, "kafkaio: delivering to %s: %w", topic)
			}
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-refused:
			if err := k.w.refusal(); err != nil {
				return err
			}
		}
	}
}

// SendAsync hands one record to the producer and returns without waiting
// for the broker: acked runs, on the producer's delivery-report goroutine,
// with the broker's answer (nil: acknowledged). It must not block. The
// error returned is the client's refusal to take the record (its queue is
// full, say); acked does not run then. Close waits for the acknowledgements
// of what was handed over, up to its timeout.
func (k *Producer) SendAsync(topic string, key, value []byte, headers []port.Header, ts time.Time, acked func(error)) error {
	return k.produce(topic, kafka.PartitionAny, key, value, headers, ts, acked)
}

func (k *Producer) produce(topic string, partition int32, key, value []byte, headers []port.Header, ts time.Time, opaque any) error {
	msg := &kafka.Message{
		TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: partition},
		Key:            key,
		Value:          value,
		Timestamp:      ts,
		Opaque:         opaque,
	}
	if len(headers) > 0 {
		msg.Headers = make([]kafka.Header, len(headers))
		for i, h := range headers {
			msg.Headers[i] = kafka.Header{Key: h.Key, Value: h.Value}
		}
	}
	if err := k.p.Produce(msg, nil); err != nil {
		return fmt.Errorf("kafkaio: producing to %s: %w", topic, err)
	}
	return nil
}

// Close flushes for up to timeout and releases the producer. It is idempotent.
func (k *Producer) Close(timeout time.Duration) {
	k.closeOnce.Do(func() {
		if k.w.refusal() != nil {
			// Refused: nothing will be delivered; do not wait for it.
			_ = k.p.Purge(kafka.PurgeQueue | kafka.PurgeInFlight | kafka.PurgeNonBlocking)
		}
		k.p.Flush(int(timeout.Milliseconds()))
		k.p.Close()
		k.wg.Wait()
		<-k.w.done
	})
}
