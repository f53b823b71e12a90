package kafkaio

import (
	"context"
	"fmt"
	"log/slog"
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
	// OnWait, when set, hears once per Restore of each partition whose
	// committed records end (its last stable offset) before its high
	// watermark: a transaction there has not ended yet, and Restore waits
	// for it. Settings.Logger (or slog.Default()) logs it otherwise.
	OnWait func(partition int32, stable, high int64)
}

var _ port.Restorer = (*Changelog)(nil)

// Restore implements port.Restorer: it reads the partitions from their
// beginning to their high watermarks as they were when it began
// (read_committed), keeps the last value of each key and drops keys whose
// last record is a tombstone.
//
// It reads to the high watermark, not to the last stable offset, because the
// offsets the new owner starts from may already include a transaction whose
// changelog records are not yet readable: the transaction coordinator writes
// a transaction's commit markers to each partition on its own, so the
// group's offsets (a marker on __consumer_offsets) can become stable before
// the marker on the changelog partition is written. Reading only to the last
// stable offset then missed that transaction's pending intents (never
// resolved: their requests are behind the committed offset) and its
// resolutions (resolved twice). Waiting for every transaction up to the high
// watermark to end costs a takeover at most the transaction timeout, when
// the previous owner died with a transaction open and did not come back to
// abort it.
func (c *Changelog) Restore(ctx context.Context, partitions []int32) (map[int32][]port.PendingRecord, error) {
	high, err := highWatermarks(ctx, c.Settings, c.Topic)
	if err != nil {
		return nil, err
	}
	onWait := c.OnWait
	if onWait == nil {
		log := c.Settings.Logger
		if log == nil {
			log = slog.Default()
		}
		onWait = func(p int32, stable, hw int64) {
			log.Info("restoring pending intents: waiting for a transaction to end on the changelog", "topic", c.Topic, "partition", p, "last_stable_offset", stable, "high_watermark", hw)
		}
	}
	live := map[int32]map[string]*schemas.PendingIntent{}
	err = readToEnd(ctx, c.Settings, c.Topic, partitions, high, onWait, func(m *kafka.Message) {
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

// highWatermarks are topic's partitions' high watermarks (ListOffsets
// read_uncommitted: librdkafka's watermark query honours the consumer's
// isolation level and gives the last stable offset instead).
func highWatermarks(ctx context.Context, s Settings, topic string) (map[int32]int64, error) {
	f, err := newFranzLag(s)
	if err != nil {
		return nil, err
	}
	defer f.close()
	hw, err := listed(ctx, "high watermarks", []string{topic}, f.adm.ListEndOffsets)
	if err != nil {
		return nil, err
	}
	return hw[topic], nil
}

// readToEnd reads the given partitions of topic from the beginning until
// each reports its end at or past until[p] (read_committed: the end it
// reports is the last stable offset, so a partition whose transaction has
// not ended yet is waited for; onWait hears of it once), without a consumer
// group.
func readToEnd(ctx context.Context, s Settings, topic string, partitions []int32, until map[int32]int64, onWait func(p int32, stable, high int64), fn func(*kafka.Message)) error {
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
	waiting := map[int32]int64{} // partition -> the last stable offset it stopped at
	for len(left) > 0 {
		if err := ctx.Err(); err != nil {
			for p, stable := range waiting {
				if left[p] {
					return fmt.Errorf("kafkaio: reading %s to its end: partition %d has a transaction open between offsets %d (last stable) and %d (high watermark): %w", topic, p, stable, until[p], err)
				}
			}
			return fmt.Errorf("kafkaio: reading %s to its end: %w", topic, err)
		}
		switch e := c.Poll(100).(type) {
		case *kafka.Message:
			if e.TopicPartition.Error == nil {
				fn(e)
			}
		case kafka.PartitionEOF:
			if off := int64(e.Offset); off < until[e.Partition] {
				if _, said := waiting[e.Partition]; !said && onWait != nil {
					onWait(e.Partition, off, until[e.Partition])
				}
				waiting[e.Partition] = off
				continue
			}
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
