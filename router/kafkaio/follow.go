package kafkaio

import (
	"context"
	"fmt"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/switchboard-mcp/switchboard/router/port"
)

// Follow reads every partition of topic without joining a consumer group,
// from its beginning, or (since not zero) from the first record stamped at or
// after since, and follows it until ctx ends or fn returns an error. It reads
// committed records only. caughtUp, if not nil, is called once, when every
// partition has been read up to where it ended when reading began (the
// consumer's end-of-partition event, which for read_committed is the last
// stable offset). It is Tail for readers that need to know when they have
// seen the past: the context store, the aggregator rebuilding its windows.
func Follow(ctx context.Context, s Settings, topic string, since time.Time, caughtUp func(), fn func(*port.Record) error) error {
	c, err := newReader(s, "follow", true, nil)
	if err != nil {
		return err
	}
	defer func() { _ = c.Close() }() // nothing to commit

	start, err := startOffsets(ctx, c, topic, true)
	if err != nil {
		return err
	}
	if !since.IsZero() {
		if start, err = offsetsAt(c, start, since); err != nil {
			return err
		}
	}
	if err := c.Assign(start); err != nil {
		return fmt.Errorf("kafkaio: assigning %s: %w", topic, err)
	}
	left := map[int32]bool{}
	for _, tp := range start {
		left[tp.Partition] = true
	}
	eof := func(p int32) {
		if len(left) == 0 {
			return
		}
		delete(left, p)
		if len(left) == 0 && caughtUp != nil {
			caughtUp()
		}
	}
	return readLoop(ctx, c, "following "+topic, []string{topic}, fn, eof)
}

// offsetsAt replaces the offsets of tps by the first offset stamped at or
// after ts (the end, where there is none).
func offsetsAt(c *consumer, tps []kafka.TopicPartition, ts time.Time) ([]kafka.TopicPartition, error) {
	q := make([]kafka.TopicPartition, len(tps))
	for i, tp := range tps {
		q[i] = kafka.TopicPartition{Topic: tp.Topic, Partition: tp.Partition, Offset: kafka.Offset(ts.UnixMilli())}
	}
	out, err := c.OffsetsForTimes(q, 10000)
	if err != nil {
		return nil, fmt.Errorf("kafkaio: seeking %s to %s: %w", *tps[0].Topic, ts.UTC().Format(time.RFC3339), err)
	}
	for i := range out {
		if out[i].Error != nil {
			return nil, fmt.Errorf("kafkaio: seeking %s[%d] to %s: %w", *out[i].Topic, out[i].Partition, ts.UTC().Format(time.RFC3339), out[i].Error)
		}
		if out[i].Offset < 0 {
			out[i].Offset = kafka.OffsetEnd
		}
	}
	return out, nil
}
