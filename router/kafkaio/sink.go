package kafkaio

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/switchboard-mcp/switchboard/router/port"
)

// Sink is an idempotent producer whose delivery reports come back on
// Acks (port.Sink).
type Sink struct {
	p            *kafka.Producer
	w            *watch
	acks         chan port.Ack
	closing      chan struct{}
	wg           sync.WaitGroup
	closeOnce    sync.Once
	flushTimeout time.Duration
	stats        func(string)
}

var _ port.Sink = (*Sink)(nil)

// NewSink creates the producer. flushTimeout bounds Close.
func NewSink(s Settings, flushTimeout time.Duration) (*Sink, error) {
	p, w, err := newProducer(s, "producer", routerProducerSettings(s))
	if err != nil {
		return nil, err
	}
	k := &Sink{p: p, w: w, acks: make(chan port.Ack, 65536), closing: make(chan struct{}), flushTimeout: flushTimeout, stats: s.Stats}
	k.wg.Add(1)
	go k.reports()
	return k, nil
}

// reports turns delivery reports into Acks until the producer closes.
func (k *Sink) reports() {
	defer k.wg.Done()
	for ev := range k.p.Events() {
		m, ok := ev.(*kafka.Message)
		if !ok {
			if st, isStats := ev.(*kafka.Stats); isStats && k.stats != nil {
				k.stats(st.String())
			}
			continue // client-level errors are retried by librdkafka and logged by it
		}
		err := m.TopicPartition.Error
		if err != nil && m.TopicPartition.Topic != nil {
			err = k.w.s.refusal(err, "Write", "topic "+*m.TopicPartition.Topic)
		}
		select {
		case k.acks <- port.Ack{Opaque: m.Opaque, Err: err}:
		case <-k.closing:
		}
	}
}

// Produce implements port.Sink. When librdkafka's queue is full it waits
// for a little room (up to a second) rather than failing at once.
func (k *Sink) Produce(o *port.Output, opaque any) error {
	msg := &kafka.Message{
		TopicPartition: kafka.TopicPartition{Topic: &o.Topic, Partition: kafka.PartitionAny},
		Key:            o.Key,
		Value:          o.Value,
		Opaque:         opaque,
	}
	if o.Partition != nil {
		msg.TopicPartition.Partition = *o.Partition
	}
	if len(o.Headers) > 0 {
		msg.Headers = make([]kafka.Header, len(o.Headers))
		for i, h := range o.Headers {
			msg.Headers[i] = kafka.Header{Key: h.Key, Value: h.Value}
		}
	}
	for try := 0; ; try++ {
		err := k.p.Produce(msg, nil)
		var kerr kafka.Error
		if err == nil || !errors.As(err, &kerr) || kerr.Code() != kafka.ErrQueueFull || try == 100 {
			return err
		}
		k.p.Flush(10)
	}
}

// Acks implements port.Sink.
func (k *Sink) Acks() <-chan port.Ack { return k.acks }

// Close flushes for up to the flush timeout and closes the producer.
func (k *Sink) Close() error {
	var err error
	k.closeOnce.Do(func() {
		if left := k.p.Flush(int(k.flushTimeout.Milliseconds())); left > 0 {
			err = fmt.Errorf("kafkaio: %d outputs not delivered before close", left)
		}
		close(k.closing)
		k.p.Close()
		k.wg.Wait()
		<-k.w.done
	})
	return err
}
