package kafkaio

import (
	"context"
	"fmt"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/switchboard-mcp/switchboard/router/port"
)

// Offsets are per-partition offsets of some topics: Offsets[topic][p] is
// partition p's.
type Offsets map[string][]int64

// FollowLive reads every partition of every topic without joining a consumer
// group, like Tail, from each partition's end. ready, if not nil, is called
// with the start offsets before the first record is handed to fn: every
// record from them on is handed to fn, in order within a partition.
func FollowLive(ctx context.Context, s Settings, topics []string, ready func(start Offsets), fn func(*port.Record) error) error {
	c, err := newReader(s, "tail", false, nil)
	if err != nil {
		return err
	}
	defer func() { _ = c.Close() }()
	var assign []kafka.TopicPartition
	start := Offsets{}
	for _, topic := range topics {
		tps, err := startOffsets(ctx, c, topic, false)
		if err != nil {
			return err
		}
		start[topic] = offsetsOf(tps)
		assign = append(assign, tps...)
	}
	if err := c.Assign(assign); err != nil {
		return fmt.Errorf("kafkaio: assigning %v: %w", topics, err)
	}
	if ready != nil {
		ready(start)
	}
	return readLoop(ctx, c, fmt.Sprintf("reading %v", topics), topics, fn, nil)
}

// offsetsOf lays out per-partition offsets by partition number.
func offsetsOf(tps []kafka.TopicPartition) []int64 {
	n := 0
	for _, tp := range tps {
		n = max(n, int(tp.Partition)+1)
	}
	out := make([]int64, n)
	for _, tp := range tps {
		out[tp.Partition] = int64(tp.Offset)
	}
	return out
}

// LowWatermarks returns, for each topic, the first offset each partition
// still holds.
func LowWatermarks(ctx context.Context, s Settings, topics []string) (Offsets, error) {
	c, err := newReader(s, "tail", false, nil)
	if err != nil {
		return nil, err
	}
	defer func() { _ = c.Close() }()
	out := Offsets{}
	for _, topic := range topics {
		tps, err := startOffsets(ctx, c, topic, true)
		if err != nil {
			return nil, err
		}
		lows := make([]int64, len(offsetsOf(tps)))
		for _, tp := range tps {
			low, _, err := c.QueryWatermarkOffsets(topic, tp.Partition, 5000)
			if err != nil {
				return nil, fmt.Errorf("kafkaio: reading the start of %s[%d]: %w", topic, tp.Partition, err)
			}
			lows[tp.Partition] = low
		}
		out[topic] = lows
	}
	return out, nil
}

// ReadRange reads, without joining a group, each partition of each topic in
// from, from its offset in from (inclusive) up to its offset in to
// (exclusive), calls fn with each committed record in that range (in order
// within a partition), and returns once every partition has been read that
// far: when it has handed over the record before to, reached to, or reached
// the partition's end. It returns ErrOffsetOutOfRange if a start offset is
// no longer held.
func ReadRange(ctx context.Context, s Settings, from, to Offsets, fn func(*port.Record) error) error {
	type key struct {
		topic string
		p     int32
	}
	left := map[key]int64{}
	var assign []kafka.TopicPartition
	topics := make([]string, 0, len(from))
	for topic, offs := range from {
		topics = append(topics, topic)
		for p, off := range offs {
			if p >= len(to[topic]) || off >= to[topic][p] {
				continue
			}
			t := topic
			left[key{topic, int32(p)}] = to[topic][p]
			assign = append(assign, kafka.TopicPartition{Topic: &t, Partition: int32(p), Offset: kafka.Offset(off)})
		}
	}
	if len(assign) == 0 {
		return nil
	}
	c, err := newReader(s, "tail", true, kafka.ConfigMap{"auto.offset.reset": "error"})
	if err != nil {
		return err
	}
	defer func() { _ = c.Close() }()
	if err := c.Assign(assign); err != nil {
		return fmt.Errorf("kafkaio: assigning %d partitions: %w", len(assign), err)
	}
	done := func(k key) {
		delete(left, k)
		_ = c.IncrementalUnassign([]kafka.TopicPartition{{Topic: &k.topic, Partition: k.p}})
	}
	for len(left) > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		switch e := c.Poll(100).(type) {
		case *kafka.Message:
			if e.TopicPartition.Error != nil {
				continue
			}
			k := key{*e.TopicPartition.Topic, e.TopicPartition.Partition}
			end, ok := left[k]
			if !ok || int64(e.TopicPartition.Offset) >= end {
				if ok {
					done(k)
				}
				continue
			}
			if err := fn(recordOf(e)); err != nil {
				return err
			}
			if int64(e.TopicPartition.Offset) >= end-1 {
				done(k)
			}
		case kafka.PartitionEOF:
			k := key{*e.Topic, e.Partition}
			if _, ok := left[k]; ok {
				done(k) // the end of the log is at or past to
			}
		case kafka.Error:
			if err := c.denial(e, topics); err != nil {
				return err
			}
			if e.Code() == kafka.ErrAutoOffsetReset {
				return fmt.Errorf("%w: %v", ErrOffsetOutOfRange, e)
			}
			if e.IsFatal() {
				return fmt.Errorf("kafkaio: reading a range: %w", e)
			}
		}
	}
	return nil
}
