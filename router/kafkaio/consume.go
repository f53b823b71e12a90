package kafkaio

import (
	"context"
	"fmt"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/switchboard-mcp/switchboard/router/port"
)

// Consume joins groupID, reads topics and calls fn for each record until ctx
// ends or fn returns an error. Offsets are committed automatically as records
// are handed to fn: what bench's in-process agent needs, not what the router
// (Source) or the Go agent runner (GroupReader) need: a member killed with
// records in hand loses them. A new group starts at the beginning of the topics,
// so requests written before an agent first joined are not missed.
func Consume(ctx context.Context, s Settings, groupID string, topics []string, fn func(*port.Record) error) error {
	c, err := newConsumer(s, "consumer", kafka.ConfigMap{
		"group.id":             groupID,
		"auto.offset.reset":    "earliest",
		"enable.auto.commit":   true,
		"isolation.level":      "read_committed",
		"enable.partition.eof": false,
	})
	if err != nil {
		return err
	}
	c.group = groupID
	defer func() { _ = c.Close() }() // a consumer that read nothing to commit closes without news
	if err := c.SubscribeTopics(topics, nil); err != nil {
		return fmt.Errorf("kafkaio: subscribing to %v: %w", topics, err)
	}
	return readLoop(ctx, c, fmt.Sprintf("consuming %v", topics), topics, fn, nil)
}

// readLoop hands every record c delivers to fn until ctx ends, fn fails, or
// the client hits a fatal error (reported as doing what) or is refused: its
// credentials or certificate, or its principal denied one of topics or its
// group (a *RefusedError). eof, if not nil, hears of every end of partition
// (when the consumer reports them).
func readLoop(ctx context.Context, c *consumer, doing string, topics []string, fn func(*port.Record) error, eof func(partition int32)) error {
	for ctx.Err() == nil {
		if err := c.w.refusal(); err != nil {
			return err
		}
		switch e := c.Poll(100).(type) {
		case *kafka.Message:
			if e.TopicPartition.Error != nil {
				continue
			}
			if err := fn(recordOf(e)); err != nil {
				return err
			}
		case kafka.PartitionEOF:
			if eof != nil {
				eof(e.Partition)
			}
		case kafka.Error:
			if err := c.denial(e, topics); err != nil {
				return err
			}
			if e.IsFatal() {
				return fmt.Errorf("kafkaio: %s: %w", doing, e)
			}
		}
	}
	return nil
}
