package kafkaio

import (
	"fmt"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/switchboard-mcp/switchboard/router"
)

// Source is the router's consumer: a member of the router's consumer group
// subscribed to the requests and responses topics together, with the range
// assignor so that the same partition number of both topics goes to the same
// instance.
type Source struct {
	c      *kafka.Consumer
	queued []any // rebalance events raised inside Poll, returned by the next Polls
}

var _ router.Source = (*Source)(nil)

// NewSource joins groupID and subscribes to topics.
func NewSource(s Settings, groupID string, topics []string) (*Source, error) {
	cm, err := s.configMap(kafka.ConfigMap{
		"group.id":                      groupID,
		"partition.assignment.strategy": "range",
		"enable.auto.commit":            true,
		"enable.auto.offset.store":      false,
		"auto.offset.reset":             "earliest",
		"isolation.level":               "read_committed",
		"enable.partition.eof":          false,
	})
	if err != nil {
		return nil, err
	}
	c, err := kafka.NewConsumer(cm)
	if err != nil {
		return nil, fmt.Errorf("kafkaio: creating the consumer: %w", err)
	}
	src := &Source{c: c}
	if err := c.SubscribeTopics(topics, src.rebalance); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("kafkaio: subscribing to %v: %w", topics, err)
	}
	return src, nil
}

// rebalance runs inside Poll. It lets the client assign or revoke as usual
// and queues the event for the router.
func (s *Source) rebalance(_ *kafka.Consumer, ev kafka.Event) error {
	switch e := ev.(type) {
	case kafka.AssignedPartitions:
		s.queued = append(s.queued, router.Assigned(fromKafka(e.Partitions)))
	case kafka.RevokedPartitions:
		s.queued = append(s.queued, router.Revoked(fromKafka(e.Partitions)))
	}
	return nil
}

// Poll implements router.Source.
func (s *Source) Poll(timeoutMs int) any {
	if ev := s.pop(); ev != nil {
		return ev
	}
	switch e := s.c.Poll(timeoutMs).(type) {
	case *kafka.Message:
		if e.TopicPartition.Error != nil {
			return e.TopicPartition.Error
		}
		rec := &router.Record{
			Topic:     *e.TopicPartition.Topic,
			Partition: e.TopicPartition.Partition,
			Offset:    int64(e.TopicPartition.Offset),
			Key:       e.Key,
			Value:     e.Value,
		}
		if e.TimestampType != kafka.TimestampNotAvailable {
			rec.TimestampMs = e.Timestamp.UnixMilli()
		}
		if len(e.Headers) > 0 {
			rec.Headers = make([]router.Header, len(e.Headers))
			for i, h := range e.Headers {
				rec.Headers[i] = router.Header{Key: h.Key, Value: h.Value}
			}
		}
		return rec
	case kafka.Error:
		if e.IsFatal() {
			return &router.FatalError{Err: e}
		}
		return e
	}
	return s.pop()
}

func (s *Source) pop() any {
	if len(s.queued) == 0 {
		return nil
	}
	ev := s.queued[0]
	s.queued[0] = nil
	s.queued = s.queued[1:]
	return ev
}

// StoreOffset implements router.Source.
func (s *Source) StoreOffset(tp router.TopicPartition, next int64) error {
	_, err := s.c.StoreOffsets([]kafka.TopicPartition{{Topic: &tp.Topic, Partition: tp.Partition, Offset: kafka.Offset(next)}})
	return err
}

// Pause implements router.Source.
func (s *Source) Pause(tps []router.TopicPartition) error { return s.c.Pause(toKafka(tps)) }

// Resume implements router.Source.
func (s *Source) Resume(tps []router.TopicPartition) error { return s.c.Resume(toKafka(tps)) }

// Close commits the stored offsets and leaves the group.
func (s *Source) Close() error { return s.c.Close() }

func fromKafka(ps []kafka.TopicPartition) []router.TopicPartition {
	out := make([]router.TopicPartition, len(ps))
	for i, p := range ps {
		out[i] = router.TopicPartition{Topic: *p.Topic, Partition: p.Partition}
	}
	return out
}

func toKafka(tps []router.TopicPartition) []kafka.TopicPartition {
	out := make([]kafka.TopicPartition, len(tps))
	for i := range tps {
		out[i] = kafka.TopicPartition{Topic: &tps[i].Topic, Partition: tps[i].Partition}
	}
	return out
}
