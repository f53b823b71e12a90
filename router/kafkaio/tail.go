package kafkaio

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/switchboard-mcp/switchboard/router/port"
)

// retryClock paces metadata retries; a package variable so the rest of the
// package stays free of wall-clock calls.
var retryClock = clockwork.NewRealClock()

func tailID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Tail reads every partition of topic without joining a consumer group (so
// every reader sees every record) until ctx ends or fn returns an error. It
// starts at each partition's end, or at its beginning when fromBeginning is
// set, and reads committed records only. ready, if not nil, is called once the
// start offsets are fixed: a record produced after ready returns will be seen.
func Tail(ctx context.Context, s Settings, topic string, fromBeginning bool, ready func(), fn func(*port.Record) error) error {
	c, err := newReader(s, "tail", false, nil)
	if err != nil {
		return err
	}
	defer func() { _ = c.Close() }() // a consumer that read nothing to commit closes without news

	start, err := startOffsets(ctx, c, topic, fromBeginning)
	if err != nil {
		return err
	}
	if err := c.Assign(start); err != nil {
		return fmt.Errorf("kafkaio: assigning %s: %w", topic, err)
	}
	if ready != nil {
		ready()
	}
	return readLoop(ctx, c, "reading "+topic, []string{topic}, fn, nil)
}

// startOffsets asks the broker for every partition of topic and where to
// start in each. While the topic does not exist yet or its partitions have no
// leader (just after it was created), it retries until ctx ends.
func startOffsets(ctx context.Context, c *consumer, topic string, fromBeginning bool) ([]kafka.TopicPartition, error) {
	var last error
	for {
		out, err := tryStartOffsets(c, topic, fromBeginning)
		if err == nil {
			return out, nil
		}
		var refused *RefusedError
		if errors.As(err, &refused) {
			return nil, refused
		}
		last = err
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("kafkaio: %w (gave up: %w)", last, ctx.Err())
		case <-retryClock.After(200 * time.Millisecond):
		}
	}
}

func tryStartOffsets(c *consumer, topic string, fromBeginning bool) ([]kafka.TopicPartition, error) {
	md, err := c.metadata(&topic, 5*time.Second)
	if err != nil {
		return nil, fmt.Errorf("reading metadata of %s: %w", topic, err)
	}
	t, ok := md.Topics[topic]
	if ok && t.Error.Code() == kafka.ErrTopicAuthorizationFailed {
		return nil, c.w.s.refusal(t.Error, "Describe", "topic "+topic)
	}
	if !ok || t.Error.Code() != kafka.ErrNoError || len(t.Partitions) == 0 {
		return nil, fmt.Errorf("topic %s is not available", topic)
	}
	out := make([]kafka.TopicPartition, 0, len(t.Partitions))
	for _, p := range t.Partitions {
		off := kafka.OffsetBeginning
		if !fromBeginning {
			// On this read_committed consumer librdkafka asks ListOffsets
			// with isolation level read_committed, so "high" is the last
			// stable offset: records of a transaction open now come after
			// it and are read once it commits (integration test
			// TestFollowLiveOpenTransactionApacheKafka).
			_, high, err := c.QueryWatermarkOffsets(topic, p.ID, 5000)
			if err != nil {
				return nil, fmt.Errorf("reading the end of %s[%d]: %w", topic, p.ID, c.w.s.refusal(err, "Describe", "topic "+topic))
			}
			off = kafka.Offset(high)
		}
		out = append(out, kafka.TopicPartition{Topic: &topic, Partition: p.ID, Offset: off})
	}
	return out, nil
}
