package kafkaio

import (
	"context"
	"fmt"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/switchboard-mcp/switchboard/router/port"
)

// Extent is what one partition of a topic held when a Scan began: offsets
// from Low (the first still kept) up to High (one past the last).
type Extent struct {
	Partition int32
	Low, High int64
}

// Scan reads topic once, up to the end it had when Scan began, without
// joining a consumer group, and returns: what a tool that lists or replays
// records needs (Tail follows a topic instead). start is called with every
// partition's extent before anything is read, and says where to begin in it
// (an offset; one below Low begins at Low) or to skip it (false). fn is called
// for every committed record read, in offset order within a partition; a
// record written after Scan began is not read. Scan returns fn's error, a
// wrapped ctx error if ctx ends first, or nil once every partition was read to
// its end.
func Scan(ctx context.Context, s Settings, topic string, start func(Extent) (int64, bool), fn func(*port.Record) error) error {
	c, err := newReader(s, "scan", true, nil)
	if err != nil {
		return err
	}
	defer func() { _ = c.Close() }() // a consumer that read nothing to commit closes without news

	md, err := c.metadata(&topic, 10*time.Second)
	if err != nil {
		return fmt.Errorf("kafkaio: reading metadata of %s: %w", topic, err)
	}
	t, ok := md.Topics[topic]
	if ok && t.Error.Code() == kafka.ErrTopicAuthorizationFailed {
		return c.w.s.refusal(t.Error, "Describe", "topic "+topic)
	}
	if !ok || t.Error.Code() != kafka.ErrNoError || len(t.Partitions) == 0 {
		return fmt.Errorf("kafkaio: topic %s does not exist", topic)
	}
	var tps []kafka.TopicPartition
	end := map[int32]int64{} // the partitions left to read, and their ends
	for _, p := range t.Partitions {
		low, high, err := c.QueryWatermarkOffsets(topic, p.ID, 10000)
		if err != nil {
			return fmt.Errorf("kafkaio: reading the extent of %s[%d]: %w", topic, p.ID, err)
		}
		from, ok := start(Extent{Partition: p.ID, Low: low, High: high})
		if !ok {
			continue
		}
		from = max(from, low)
		if from >= high {
			continue
		}
		tps = append(tps, kafka.TopicPartition{Topic: &topic, Partition: p.ID, Offset: kafka.Offset(from)})
		end[p.ID] = high
	}
	if len(tps) == 0 {
		return nil
	}
	if err := c.Assign(tps); err != nil {
		return fmt.Errorf("kafkaio: assigning %s: %w", topic, err)
	}
	for len(end) > 0 {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("kafkaio: reading %s: %w", topic, err)
		}
		switch e := c.Poll(100).(type) {
		case *kafka.Message:
			p, off := e.TopicPartition.Partition, int64(e.TopicPartition.Offset)
			high, reading := end[p]
			if e.TopicPartition.Error != nil || !reading || off >= high {
				continue
			}
			if err := fn(recordOf(e)); err != nil {
				return err
			}
			if off >= high-1 {
				delete(end, p)
			}
		case kafka.PartitionEOF:
			// The end as read_committed sees it: the high watermark, or the
			// first offset of a transaction still open.
			delete(end, e.Partition)
		case kafka.Error:
			if err := c.denial(e, []string{topic}); err != nil {
				return err
			}
			if e.IsFatal() {
				return fmt.Errorf("kafkaio: reading %s: %w", topic, e)
			}
		}
	}
	return nil
}
