package kafkaio

import (
	"context"
	"fmt"
	"strconv"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/switchboard-mcp/switchboard/router/lag"
)

var _ lag.EndsAdmin = (*LagAdmin)(nil)

// Ends implements lag.EndsAdmin: each partition's last stable offset
// (ListOffsets, latest, read_committed) and high watermark (the same,
// read_uncommitted); a topic that does not exist is left out. It uses only
// the admin client, so the HangWatch may call it while the Sampler runs.
func (l *LagAdmin) Ends(ctx context.Context, topics []string) (map[string]map[int32]lag.Ends, error) {
	ctx, cancel := context.WithTimeout(ctx, l.Timeout)
	defer cancel()
	if l.f != nil {
		return l.f.ends(ctx, topics)
	}
	desc, err := l.a.DescribeTopics(ctx, kafka.NewTopicCollectionOfTopicNames(topics), kafka.SetAdminRequestTimeout(l.Timeout))
	if err != nil {
		return nil, fmt.Errorf("kafkaio: describing topics %v: %w", topics, err)
	}
	latest := map[kafka.TopicPartition]kafka.OffsetSpec{}
	for _, td := range desc.TopicDescriptions {
		switch td.Error.Code() {
		case kafka.ErrNoError:
		case kafka.ErrUnknownTopicOrPart, kafka.ErrUnknownTopic:
			continue
		default:
			return nil, fmt.Errorf("kafkaio: describing topic %s: %w", td.Name, td.Error)
		}
		for _, p := range td.Partitions {
			topic := td.Name
			latest[kafka.TopicPartition{Topic: &topic, Partition: int32(p.Partition)}] = kafka.LatestOffsetSpec
		}
	}
	out := map[string]map[int32]lag.Ends{}
	if len(latest) == 0 {
		return out, nil
	}
	stable, err := l.a.ListOffsets(ctx, latest, kafka.SetAdminIsolationLevel(kafka.IsolationLevelReadCommitted), kafka.SetAdminRequestTimeout(l.Timeout))
	if err != nil {
		return nil, fmt.Errorf("kafkaio: listing the last stable offsets of %v: %w", topics, err)
	}
	high, err := l.a.ListOffsets(ctx, latest, kafka.SetAdminIsolationLevel(kafka.IsolationLevelReadUncommitted), kafka.SetAdminRequestTimeout(l.Timeout))
	if err != nil {
		return nil, fmt.Errorf("kafkaio: listing the high watermarks of %v: %w", topics, err)
	}
	// ResultInfos are keyed by TopicPartition, whose Topic is a pointer:
	// match the two answers by name and number.
	type key struct {
		topic string
		p     int32
	}
	his := make(map[key]kafka.ListOffsetsResultInfo, len(high.ResultInfos))
	for tp, h := range high.ResultInfos {
		his[key{*tp.Topic, tp.Partition}] = h
	}
	for tp, s := range stable.ResultInfos {
		name := *tp.Topic + "[" + strconv.Itoa(int(tp.Partition)) + "]"
		h, ok := his[key{*tp.Topic, tp.Partition}]
		switch {
		case s.Error.Code() != kafka.ErrNoError:
			return nil, fmt.Errorf("kafkaio: the last stable offset of %s: %w", name, s.Error)
		case !ok:
			return nil, fmt.Errorf("kafkaio: no high watermark for %s", name)
		case h.Error.Code() != kafka.ErrNoError:
			return nil, fmt.Errorf("kafkaio: the high watermark of %s: %w", name, h.Error)
		}
		if out[*tp.Topic] == nil {
			out[*tp.Topic] = map[int32]lag.Ends{}
		}
		out[*tp.Topic][tp.Partition] = lag.Ends{Stable: int64(s.Offset), High: int64(h.Offset)}
	}
	return out, nil
}
