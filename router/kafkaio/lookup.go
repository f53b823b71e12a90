package kafkaio

import (
	"context"
	"fmt"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// TopicState is a topic's id and, per partition, its first offset and the
// end a read_committed reader reads up to (the last stable offset).
type TopicState struct {
	ID   string // "" if the cluster does not say (no topic ids)
	Low  []int64
	High []int64
}

// DescribeTopic returns topic's state. It is what the API's lookup store
// checks, on start, against the topic it was built from, and reads its
// expiry from.
func DescribeTopic(ctx context.Context, s Settings, topic string) (TopicState, error) {
	c, err := newReader(s, "describe", false, nil)
	if err != nil {
		return TopicState{}, err
	}
	defer func() { _ = c.Close() }()
	tps, err := tryStartOffsets(c, topic)
	if err != nil {
		return TopicState{}, fmt.Errorf("kafkaio: %w", err)
	}
	n := len(offsetsOf(tps))
	st := TopicState{Low: make([]int64, n), High: make([]int64, n)}
	for _, tp := range tps {
		if err := ctx.Err(); err != nil {
			return TopicState{}, err
		}
		// On this read_committed consumer "high" is the last stable
		// offset (see Reading.bounds).
		low, high, err := c.QueryWatermarkOffsets(topic, tp.Partition, 5000)
		if err != nil {
			return TopicState{}, fmt.Errorf("kafkaio: reading the offsets of %s[%d]: %w", topic, tp.Partition, err)
		}
		st.Low[tp.Partition], st.High[tp.Partition] = low, high
	}
	st.ID = topicID(ctx, c.Consumer, topic)
	return st, nil
}

// topicID returns topic's id, or "" when the cluster cannot say (an old
// broker, an embedded one): callers then tell a recreated topic by its
// offsets alone.
func topicID(ctx context.Context, c *kafka.Consumer, topic string) string {
	a, err := kafka.NewAdminClientFromConsumer(c)
	if err != nil {
		return ""
	}
	defer a.Close()
	res, err := a.DescribeTopics(ctx, kafka.NewTopicCollectionOfTopicNames([]string{topic}))
	if err != nil || len(res.TopicDescriptions) != 1 || res.TopicDescriptions[0].Error.Code() != kafka.ErrNoError {
		return ""
	}
	id := res.TopicDescriptions[0].TopicID
	if id.GetMostSignificantBits() == 0 && id.GetLeastSignificantBits() == 0 {
		return ""
	}
	return id.String()
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
		tps, err := startOffsets(ctx, c, topic)
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
