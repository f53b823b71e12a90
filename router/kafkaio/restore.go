package kafkaio

import (
	"context"
	"fmt"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/switchboard-mcp/switchboard/router/port"
	"github.com/switchboard-mcp/switchboard/schemas"
)

// Changelog reads the router's compacted pending-state topic.
type Changelog struct {
	Settings Settings
	Topic    string
	Codec    *schemas.Codec
}

var _ port.Restorer = (*Changelog)(nil)

// Restore implements port.Restorer: it reads the partitions from their
// beginning to their end (read_committed), keeps the last value of each key
// and drops keys whose last record is a tombstone.
func (c *Changelog) Restore(ctx context.Context, partitions []int32) (map[int32][]port.PendingRecord, error) {
	live := map[int32]map[string]*schemas.PendingIntent{}
	err := readToEnd(ctx, c.Settings, c.Topic, partitions, func(m *kafka.Message) {
		p := m.TopicPartition.Partition
		if live[p] == nil {
			live[p] = map[string]*schemas.PendingIntent{}
		}
		id := string(m.Key)
		if m.Value == nil {
			delete(live[p], id)
			return
		}
		var pi schemas.PendingIntent
		if err := c.Codec.Decode(m.Value, &pi); err != nil {
			return // not ours to judge here: an undecodable state record restores nothing
		}
		live[p][id] = &pi
	})
	if err != nil {
		return nil, err
	}
	out := make(map[int32][]port.PendingRecord, len(live))
	for p, m := range live {
		for key, pi := range m {
			out[p] = append(out[p], port.PendingRecord{Key: key, Intent: pi})
		}
	}
	return out, nil
}

// FallbackFeed returns a port.FallbackFeed that reads the fallback-cache
// topic from its beginning and follows it.
func FallbackFeed(s Settings, topic string, codec *schemas.Codec) port.FallbackFeed {
	return func(ctx context.Context, apply func(*schemas.FallbackAnswer)) error {
		return Read(ctx, s, Reading{Topics: []string{topic}, From: FromBeginning()}, func(rec *port.Record) error {
			if rec.Value == nil {
				return nil
			}
			var fa schemas.FallbackAnswer
			if err := codec.Decode(rec.Value, &fa); err == nil {
				apply(&fa)
			}
			return nil
		})
	}
}

// readToEnd reads the given partitions of topic from the beginning until
// each reports its end, without a consumer group.
func readToEnd(ctx context.Context, s Settings, topic string, partitions []int32, fn func(*kafka.Message)) error {
	c, err := newConsumer(s, "restore consumer", kafka.ConfigMap{
		"group.id":             "switchboard-restore-" + tailID(),
		"enable.auto.commit":   false,
		"isolation.level":      "read_committed",
		"enable.partition.eof": true,
		"auto.offset.reset":    "earliest",
	})
	if err != nil {
		return err
	}
	defer func() { _ = c.Close() }() // a consumer that read nothing to commit closes without news
	md, err := c.metadata(&topic, 10*time.Second)
	if err != nil {
		return fmt.Errorf("kafkaio: reading metadata of %s: %w", topic, err)
	}
	if t, ok := md.Topics[topic]; ok && t.Error.Code() == kafka.ErrTopicAuthorizationFailed {
		return s.refusal(t.Error, "Describe", "topic "+topic)
	} else if !ok || t.Error.Code() != kafka.ErrNoError || len(t.Partitions) == 0 {
		return fmt.Errorf("kafkaio: topic %s does not exist (create it with 'switchboard topics create')", topic)
	}
	tps := make([]kafka.TopicPartition, len(partitions))
	for i, p := range partitions {
		tps[i] = kafka.TopicPartition{Topic: &topic, Partition: p, Offset: kafka.OffsetBeginning}
	}
	if err := c.Assign(tps); err != nil {
		return fmt.Errorf("kafkaio: assigning %s: %w", topic, err)
	}
	left := map[int32]bool{}
	for _, p := range partitions {
		left[p] = true
	}
	for len(left) > 0 {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("kafkaio: reading %s to its end: %w", topic, err)
		}
		switch e := c.Poll(100).(type) {
		case *kafka.Message:
			if e.TopicPartition.Error == nil {
				fn(e)
			}
		case kafka.PartitionEOF:
			delete(left, e.Partition)
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
